"""`graphrag-lite experiment run FILE`: build every variant's index, evaluate it, judge, tabulate.

Work is shared three ways. Variants whose index settings are equal (they differ only in query settings)
share one index folder, named by a digest of those settings, so its stages run once. A new index folder
starts from the longest run of leading stages another index of the experiment already finished with the
same fingerprint (same settings, same inputs): their tables are linked in, so a variant that differs only
in `community_reports` reruns only that stage and the ones after it. And all variants use the project's
one model cache. Re-running skips what is finished: stages by their fingerprints, evaluations by a digest
of the index, the query settings and the questions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console

from graphrag_lite.config import CONFIG_FILENAMES, GraphRagConfig
from graphrag_lite.errors import ConfigError, PipelineFileError
from graphrag_lite.evaluation.evaluate import QuestionResult, evaluate_index, methods_to_run
from graphrag_lite.evaluation.questions import Question, load_questions, questions_digest
from graphrag_lite.experiment.spec import ExperimentSpec, Variant, expand_variants, load_spec
from graphrag_lite.ids import json_digest
from graphrag_lite.llm.ledger import BudgetExceeded
from graphrag_lite.pipeline.committing import readable_state, working_store
from graphrag_lite.pipeline.definition import QUERY_SECTIONS, Pipeline
from graphrag_lite.pipeline.fingerprints import reusable_prefix
from graphrag_lite.pipeline.records import STATE_FILE
from graphrag_lite.pipeline.runner import run_pipeline
from graphrag_lite.pipeline.settings import configure
from graphrag_lite.stages import STAGES
from graphrag_lite.storage import OutputStore, link_or_copy, read_json, write_json
from graphrag_lite.version import __version__


@dataclass
class PlannedVariant:
    variant: Variant
    config: GraphRagConfig
    pipeline: Pipeline
    index: str  # its index folder's name under <output>/indexes
    own_budget: float | None = None  # the project's (or base's) budget.max_cost_usd: it still applies


@dataclass
class ExperimentPlan:
    path: Path
    spec: ExperimentSpec
    variants: list[PlannedVariant]
    questions: list[Question]

    @property
    def output(self) -> Path:
        assert self.spec.output is not None
        return self.spec.output

    @property
    def answering(self) -> bool:
        """Whether the questions are answered: answers are asked for and some questions have gold answers to
        score them against, or a judge compares the variants' answers."""
        return (self.spec.answers and any(q.answers for q in self.questions)) or self.spec.judge is not None


@dataclass
class VariantRun:
    """What running one variant did in this invocation."""

    stages_run: list[str] = field(default_factory=list)
    shared_from: str | None = None  # the index whose finished stages seeded this one's
    evaluation_reused: bool = False
    cost_usd: float = 0.0  # paid in this invocation (cache hits are free)


def plan_experiment(path: Path) -> ExperimentPlan:
    """Read and check everything before anything runs: the file, every variant's settings, the questions."""
    spec = load_spec(path)
    variants = expand_variants(spec, path)
    if spec.judge and set(spec.judge.methods) - set(spec.methods):
        raise ConfigError(f"{path}: judge.methods {spec.judge.methods}: judged methods must be among `methods` "
                          f"({', '.join(spec.methods)})")
    if spec.settings is None and not any((spec.project / name).is_file() for name in CONFIG_FILENAMES):
        raise ConfigError(f"{path}: project: no settings.yaml in {spec.project}; set `project:` to the folder that "
                          "holds settings.yaml (relative to this file), or `settings:` to the settings file")
    planned = [_plan_variant(spec, path, v) for v in variants]
    if spec.judge and spec.judge.baseline not in {v.name for v in variants}:
        raise ConfigError(f"{path}: judge.baseline '{spec.judge.baseline}' is not a variant; variants: "
                          f"{', '.join(v.name for v in variants)}")
    if spec.judge and spec.judge.model_id not in planned[0].config.models:
        raise ConfigError(f"{path}: judge.model_id '{spec.judge.model_id}' is not a model of the project's settings "
                          f"({', '.join(planned[0].config.models)})")
    if spec.questions and not spec.questions.is_file():
        raise ConfigError(f"{path}: questions: {spec.questions} not found (a path relative to this file)")
    questions = load_questions(spec.questions) if spec.questions else []
    chunkings = {json.dumps(p.config.section_fingerprint(["input", "chunking"]), default=str) for p in planned}
    if len(chunkings) > 1 and any(q.evidence_text_units for q in questions):
        raise ConfigError(f"{spec.questions}: evidence_text_units name text units of one index, and the variants of "
                          f"{path} chunk the input differently; give the gold as `evidence` sentences or "
                          "`evidence_documents` instead")
    return ExperimentPlan(path, spec, planned, questions)


def _plan_variant(spec: ExperimentSpec, path: Path, variant: Variant) -> PlannedVariant:
    try:
        config, pipeline = configure(STAGES, spec.project, spec.settings, variant.overrides,
                                     overrides_from=variant.sources)
    except PipelineFileError as err:
        where = variant.sources.get("pipeline", f"{path}, variant '{variant.name}'")
        raise PipelineFileError(f"{where}: {err}") from None
    index = f"{pipeline.name}-{index_digest(config, pipeline)}"
    folder = (spec.output or path.parent) / "indexes" / index
    config.output.base_dir = folder
    config.vector_store.db_uri = str(folder / "lancedb")
    return PlannedVariant(variant, config, pipeline, index, config.budget.max_cost_usd)


def index_digest(config: GraphRagConfig, pipeline: Pipeline) -> str:
    """Equal for two variants exactly when every stage of their pipelines has the same settings."""
    sections = sorted({s for stage in pipeline.stages for s in stage.config_sections} - {"vector_store"})
    payload = {"stages": [s.name for s in pipeline.stages], "settings": config.section_fingerprint(sections)}
    return json_digest(payload, 5)


def build_variant_index(planned: PlannedVariant, plan: ExperimentPlan, console: Console, built: set[str]
                        ) -> VariantRun:
    """Run the variant's pipeline in its index folder, first seeding a new folder from another index. An
    index already built in this invocation (`built`) is used as it is: a stage that failed for some items
    is retried by the next invocation, not once per variant, so variants sharing an index are scored on
    the same tables."""
    run = VariantRun()
    if planned.index in built:
        return run
    built.add(planned.index)
    if not (planned.config.output.base_dir / STATE_FILE).is_file():
        run.shared_from = seed_from_other_index(planned, plan.output / "indexes")
    summary = run_pipeline(planned.config, planned.pipeline, console, brief=True)
    run.stages_run = [name for name, s in summary.stages.items()
                      if not str(s.get("status", "")).startswith("unchanged")]
    run.cost_usd = (summary.llm or {}).get("cost_usd", 0.0)
    return run


def seed_from_other_index(planned: PlannedVariant, indexes: Path) -> str | None:
    """Link in the tables of the longest run of leading stages that another index finished with the same
    fingerprints, and record them as finished here; the pipeline then reuses them. Returns that index."""
    shares = [(reusable_prefix(planned.pipeline, planned.config,
                               working_store(other.parent, readable_state(other.parent, None), None),
                               readable_state(other.parent, None), len(planned.pipeline.stages)), other.parent)
              for other in (sorted(indexes.glob("*/" + STATE_FILE)) if indexes.is_dir() else [])]
    count, donor = max(shares, key=lambda share: share[0], default=(0, None))  # the first of the longest
    if donor is None or count == 0:
        return None
    folder = planned.config.output.base_dir
    folder.mkdir(parents=True, exist_ok=True)
    donor_state = readable_state(donor, None)
    donor_store = working_store(donor, donor_state, None)
    state = {}
    for stage in planned.pipeline.stages[:count]:
        state[stage.name] = donor_state[stage.name]
        for table, digest in donor_state[stage.name]["outputs"].items():
            seeded = OutputStore(folder, {table: digest}).path(table)
            seeded.parent.mkdir(parents=True, exist_ok=True)
            link_or_copy(donor_store.path(table), seeded)
    write_json(folder / STATE_FILE, state)
    return donor.name


async def evaluate_variant(planned: PlannedVariant, plan: ExperimentPlan,
                           on_done: Callable[[], None] | None = None) -> tuple[list[QuestionResult], bool]:
    """The variant's evaluation: reused when the index, the query settings and the questions are unchanged."""
    from graphrag_lite.query.engine import GraphRAG

    target = plan.output / "variants" / planned.variant.name / "evaluation.json"
    key = evaluation_key(planned, plan)
    if target.is_file() and (stored := read_json(target)).get("key") == key and \
            not any(r.get("failed") for r in stored["results"]):  # failed questions are asked again
        return [QuestionResult(**r) for r in stored["results"]], True
    judged = plan.spec.judge.methods if plan.spec.judge else []
    results = await evaluate_index(GraphRAG(planned.config), plan.questions, plan.spec.methods, plan.answering,
                                   plan.spec.response_type, on_done, answer_every_question=judged)
    write_json(target, {"key": key, "methods": methods_to_run(plan.spec.methods, plan.questions),
                        "results": [asdict(r) for r in results]})
    return results, False


def evaluation_key(planned: PlannedVariant, plan: ExperimentPlan) -> str:
    state = read_json(planned.config.output.base_dir / STATE_FILE)
    payload = {"index": planned.index, "stages": {name: [entry.get(k) for k in ("fingerprint", "outputs", "external")]
                                                  for name, entry in state.items()},
               "query": planned.config.section_fingerprint(QUERY_SECTIONS),
               "questions": questions_digest(plan.questions), "methods": plan.spec.methods, "answer": plan.answering,
               "version": __version__,
               "response_type": plan.spec.response_type}
    return json_digest(payload, 12)


def remaining_budget(plan: ExperimentPlan, spent: float, planned: PlannedVariant) -> float | None:
    """The budget of the next step: what is left of the experiment's budget.max_cost_usd, or the variant's
    own budget (settings.yaml, base, the variant) when that is smaller; BudgetExceeded when nothing is left."""
    limit = plan.spec.budget.max_cost_usd
    if limit is not None and spent >= limit:
        raise BudgetExceeded(f"experiment budget reached: ${spent:.4f} spent of budget.max_cost_usd=${limit}; "
                             "finished variants are kept: raise the budget and run the same command to go on")
    left = None if limit is None else limit - spent
    own = planned.own_budget
    return own if left is None else left if own is None else min(own, left)
