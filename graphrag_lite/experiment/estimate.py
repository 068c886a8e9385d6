"""`experiment run --dry-run`: the model calls and cost of the whole experiment before any is made.

Each distinct index is estimated as `index --dry-run` does (model-free stages run, model stages are
counted from their inputs). An estimable model stage that two indexes would run with the same fingerprint
is counted once: the second index reuses the first's. Query calls are counted per answered question and
method (local search makes one per round), judge calls two per pair (both orders), each at the method's
full context budget, so the figure is an upper bound for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.estimate import CallEstimate
from graphrag_lite.experiment.runner import ExperimentPlan, PlannedVariant
from graphrag_lite.pipeline.dry_run import dry_run
from graphrag_lite.pipeline.fingerprints import stage_fingerprint
from graphrag_lite.pipeline.records import STATE_FILE
from graphrag_lite.storage import read_json


@dataclass
class ExperimentEstimate:
    rows: list[dict[str, Any]] = field(default_factory=list)  # what, calls, prompt tokens, cost
    not_estimable: list[str] = field(default_factory=list)

    @property
    def cost_usd(self) -> float:
        return round(sum(r["cost_usd"] or 0.0 for r in self.rows), 6)

    @property
    def calls(self) -> int:
        return sum(r["calls"] for r in self.rows)


def estimate_experiment(plan: ExperimentPlan) -> ExperimentEstimate:
    estimate = ExperimentEstimate()
    counted: set[str] = set()
    for planned in {p.index: p for p in plan.variants}.values():
        stages = dry_run(planned.config, planned.pipeline, Console(quiet=True))
        state = read_json(planned.config.output.base_dir / STATE_FILE)
        digests = {t: d for entry in state.values() for t, d in entry.get("outputs", {}).items()}
        for stage in planned.pipeline.stages:
            found = stages.get(stage.name, {})  # a stage the dry run did not reach has nothing to count
            if "calls" not in found:
                if "not estimable" in found.get("note", ""):
                    estimate.not_estimable.append(f"{planned.index}: {stage.name}")
                continue
            fingerprint = stage_fingerprint(stage, planned.config, digests)
            shared = fingerprint in counted
            counted.add(fingerprint)
            estimate.rows.append({"what": f"{planned.index}: {stage.name}" + (" (shared)" if shared else ""),
                                  "calls": 0 if shared else found["calls"] + found["up_to_extra_calls"],
                                  "prompt_tokens": 0 if shared else found["prompt_tokens"] +
                                  found["estimated_extra_prompt_tokens"],
                                  "cost_usd": 0.0 if shared else found["estimated_cost_usd"]})
    for planned in plan.variants if plan.questions else []:
        estimate.rows += _query_rows(planned, plan)
    if plan.spec.judge and plan.answering:
        estimate.rows.append(_judge_row(plan))
    return estimate


def _query_rows(planned: PlannedVariant, plan: ExperimentPlan) -> list[dict[str, Any]]:
    """Answer calls (local search: one more per extra round), or, with no answers, only the calls of local
    search's later rounds (`local_search.hops` > 1 asks the model for each round's lead)."""
    cfg = planned.config
    rows = []
    if not plan.answering:
        extra = (cfg.local_search.hops - 1) * len(plan.questions) if "local" in plan.spec.methods else 0
        model_id = cfg.local_search.chat_model_id
        if not extra or model_id is None:
            return []
        call = CallEstimate("query_local_hop", model_id, extra, 0, extra * cfg.local_search.hop_context_tokens,
                            extra * 30, 0)
        return [_row(f"{planned.variant.name}: local rounds after the first", call, cfg)]
    budgets = {"local": (cfg.local_search.chat_model_id, cfg.local_search.max_context_tokens, cfg.local_search.hops),
               "basic": (cfg.basic_search.chat_model_id, cfg.basic_search.max_context_tokens, 1),
               "global": (cfg.global_search.chat_model_id, cfg.global_search.max_context_tokens, 2)}
    for method in plan.spec.methods:
        model_id, tokens, calls = budgets[method]
        if model_id is None:
            continue
        count = calls * len(plan.questions)
        call = CallEstimate(f"query_{method}", model_id, count, 0, count * tokens, count * 200, 0)
        note = " (at least: map calls depend on the reports)" if method == "global" else ""
        rows.append(_row(f"{planned.variant.name}: {method} answers{note}", call, cfg))
    return rows


def _judge_row(plan: ExperimentPlan) -> dict[str, Any]:
    judge = plan.spec.judge
    assert judge is not None
    count = 2 * (len(plan.variants) - 1) * len(judge.methods) * len(plan.questions)
    call = CallEstimate("judge", judge.model_id, count, 0, count * 1500, count * 300, 0)
    return _row("judge (both orders of every pair)", call, plan.variants[0].config)


def _row(what: str, call: CallEstimate, config: GraphRagConfig) -> dict[str, Any]:
    return {"what": what, "calls": call.calls, "prompt_tokens": call.prompt_tokens, "cost_usd": call.cost(config)}
