"""Each stage alone, from the golden tables of one run (tests/data/golden/, rebuilt by its regenerate.py), in the
manner of Microsoft GraphRAG's verb tests: a stage reads the golden copies of its inputs and must write the golden
copies of its outputs. A change to one stage fails here under that stage's name and table, not as a drift in the
final index several stages later.

The model stages run with the same offline fake model as the golden run, so their tables are golden too; how they
treat real models' replies is tested in tests/test_model_stage_replies.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest
from rich.progress import Progress

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.pipeline.contract import StageContext, StageResult
from graphrag_lite.pipeline.definition import load_pipeline
from graphrag_lite.pipeline.model_access import ModelAccess
from graphrag_lite.stages import STAGES
from graphrag_lite.storage import OutputStore
from graphrag_lite.tables import conform
from tests.conftest import check_index
from tests.data.golden.regenerate import GOLDEN, project_config

# Tables whose row order is part of their contract, compared row by row as written: the numbered ones in the order
# of their human_readable_id (0, 1, 2, ... on a first run), communities by level and number, reports by community.
ORDERED_TABLES = {"input_documents", "documents", "base_text_units", "text_units", "entities", "relationships",
                  "covariates", "communities", "community_reports"}
# The other tables' row order follows from dictionary and grouping orders that no reader relies on: both sides are
# sorted (a stable sort) by the columns that identify a row before they are compared.
ROW_KEYS = {
    "raw_entities": ["text_unit_id", "name", "type", "description"],
    "raw_relationships": ["text_unit_id", "source", "target", "description", "strength"],
    "raw_claims": ["text_unit_id", "subject", "object", "type", "description"],
    "merged_entities": ["title"],
    "merged_relationships": ["source", "target"],
    "summarized_entities": ["title"],
    "summarized_relationships": ["source", "target"],
    "entity_aliases": ["alias", "title"],
    "ambiguous_aliases": ["title"],
}
# Every other column is compared exactly (floats to pandas' default relative tolerance of 1e-5, so a platform's
# last bits in Leiden or NPMI weights do not matter). `period` is left out: it is the date the stage ran.
RUN_DATE_COLUMNS = ("period",)

MODEL_FREE = [("fast", name) for name in ("load_documents", "chunk_text", "extract_graph_nlp", "extract_claims",
                                          "merge_graph", "join_descriptions", "cluster_graph", "finalize_text_units",
                                          "community_reports_extractive")] + \
             [("standard", name) for name in ("load_documents", "chunk_text", "merge_graph", "cluster_graph",
                                              "finalize_text_units")]
WITH_FAKE_MODEL = [("standard", name) for name in ("extract_graph", "extract_claims", "summarize_descriptions",
                                                   "community_reports")]


def golden_table(method: str, name: str) -> pd.DataFrame:
    return pd.read_parquet(GOLDEN / method / f"{name}.parquet")


def golden_stage(method: str, stage_name: str) -> dict:
    """What the stage said in the golden run (summary, problems, details), from stages.json."""
    return json.loads((GOLDEN / method / "stages.json").read_text(encoding="utf-8"))[stage_name]


def golden_inputs(method: str, stage_name: str) -> dict[str, pd.DataFrame]:
    return {name: golden_table(method, name) for name in STAGES[stage_name].reads}


def golden_config(tmp_path: Path, method: str) -> GraphRagConfig:
    """The golden run's settings of `method`, in a fresh project (its input: the golden corpus) under tmp_path."""
    config, _ = project_config(tmp_path / method, method)
    return config


def run_stage_alone(stage_name: str, config: GraphRagConfig, input_tables: dict[str, pd.DataFrame]) -> StageResult:
    """Run one registered stage as the pipeline runner does, in isolation: its input tables are written to a fresh
    output folder (config.output.base_dir, which must hold no tables), the stage runs with the answer cache off
    and no progress display, and its output tables come back as the runner writes them (conformed to the table
    contracts, through Parquet). The one place that knows how a stage is called: keep it so."""
    stage = STAGES[stage_name]
    store = OutputStore(config.output.base_dir)
    assert not list(config.output.base_dir.glob("*.parquet")), f"{config.output.base_dir} is not a fresh folder"
    for name, table in input_tables.items():
        store.write(name, table)
    config = config.model_copy(deep=True)
    config.cache.enabled = False  # no answer and no clustering remembered from another test
    models = ModelAccess(config, use_cache=False)
    try:
        result = stage.run(StageContext(config=config, store=store, progress=Progress(disable=True), stage=stage,
                                        models=models))
        for name in stage.writes:
            store.write(name, conform(name, result.tables[name]))
        result.tables = {name: store.read(name) for name in stage.writes}
    finally:
        models.close()
    return result


def assert_table_matches(stage_name: str, name: str, actual: pd.DataFrame, expected: pd.DataFrame,
                         golden: Path) -> None:
    """`actual` equals the golden table (in the same row order for ORDERED_TABLES, else after the sort by ROW_KEYS)
    in every column but the run date; a difference is reported under the stage's and the table's names."""
    where = f"stage {stage_name}, table {name} (golden: {golden / f'{name}.parquet'})"
    if list(actual.columns) != list(expected.columns):
        raise AssertionError(f"{where}: columns {list(actual.columns)}, golden {list(expected.columns)}")
    if len(actual) != len(expected):
        raise AssertionError(f"{where}: {len(actual)} rows, golden {len(expected)}")
    ignored = [c for c in RUN_DATE_COLUMNS if c in expected.columns]

    def ordered(table: pd.DataFrame) -> pd.DataFrame:
        table = table.drop(columns=ignored)
        return table if name in ORDERED_TABLES else table.sort_values(ROW_KEYS[name], kind="stable")

    try:
        pd.testing.assert_frame_equal(ordered(actual).reset_index(drop=True), ordered(expected).reset_index(drop=True))
    except AssertionError as err:
        raise AssertionError(f"{where} differs from the golden run:\n{err}") from None


def assert_outputs_match(method: str, stage_name: str, result: StageResult) -> None:
    """Every table the stage writes is the golden one, in the order the stage declares them."""
    for name in STAGES[stage_name].writes:
        assert_table_matches(stage_name, name, result.tables[name], golden_table(method, name), GOLDEN / method)


def assert_report_matches(method: str, stage_name: str, result: StageResult) -> None:
    """What the stage says (problems, details as stats.json holds them, summary) is what it said in the golden run."""
    said = golden_stage(method, stage_name)
    now = {"problems": result.problems, "details": json.loads(json.dumps(result.details, default=str)) or None,
           "summary": result.summary}
    for key, value in now.items():
        if value != said[key]:
            raise AssertionError(f"stage {stage_name}, its {key} (golden: {GOLDEN / method / 'stages.json'}): "
                                 f"{value!r}, golden {said[key]!r}")


def check_stage(tmp_path: Path, method: str, stage_name: str) -> None:
    """The stage alone from the golden inputs of `method`: every table it writes and what it reports (summary,
    problems, details) as in the golden run."""
    result = run_stage_alone(stage_name, golden_config(tmp_path, method), golden_inputs(method, stage_name))
    assert_outputs_match(method, stage_name, result)
    assert_report_matches(method, stage_name, result)


@pytest.mark.parametrize(("method", "stage_name"), MODEL_FREE, ids=[f"{m}-{s}" for m, s in MODEL_FREE])
def test_model_free_stage_alone_writes_the_golden_tables(tmp_path, method, stage_name):
    check_stage(tmp_path, method, stage_name)


@pytest.mark.parametrize(("method", "stage_name"), WITH_FAKE_MODEL, ids=[f"{m}-{s}" for m, s in WITH_FAKE_MODEL])
def test_model_stage_alone_with_the_fake_model_writes_the_golden_tables(tmp_path, method, stage_name):
    check_stage(tmp_path, method, stage_name)


@pytest.mark.parametrize("method", ["fast", "standard"])
def test_golden_tables_are_a_whole_consistent_index(method):
    """Every table a stage of the method reads or writes is stored, and the final ones pass the team's index
    checker: the golden data is an index, not a pile of tables."""
    pipeline = load_pipeline(method, STAGES)
    tables = {name for stage in pipeline.stages for name in (*stage.reads, *stage.writes)}
    stored = {p.stem for p in (GOLDEN / method).glob("*.parquet")}
    assert tables <= stored, f"golden {method}: {sorted(tables - stored)} missing; see tests/data/golden/README.md"
    code, report = check_index(GOLDEN / method, "--method", method)
    assert code == 0, report


# One deliberate change of each stage's behaviour for each golden comparison above (a setting, or a replaced or
# wrapped attribute of the stage's module), and the first table the stage writes that must then differ: the
# comparisons can fail, and say which stage and table.
Patch = Callable[[ModuleType, pytest.MonkeyPatch], None]


def replaced(name: str, value: Any) -> Patch:
    return lambda module, monkeypatch: monkeypatch.setattr(module, name, value)


def wrapped(name: str, wrapper: Callable[[Any], Any]) -> Patch:
    return lambda module, monkeypatch: monkeypatch.setattr(module, name, wrapper(getattr(module, name)))


def alex_read_as_alex_mercer(merge: Callable[..., Any]) -> Callable[..., Any]:
    """merge_graph's core, given entity records in which ALEX was already taken for ALEX MERCER."""
    return lambda entities, relationships, **options: merge(entities.replace({"name": {"ALEX": "ALEX MERCER"}}),
                                                            relationships, **options)


def entity_ids_reversed(finalize: Callable[..., Any]) -> Callable[..., Any]:
    """finalize_text_units' core, listing each text unit's entities in the reverse order."""
    def finalize_reversed(*tables: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        units, covariates = finalize(*tables)
        return units.assign(entity_ids=[list(ids)[::-1] for ids in units["entity_ids"]]), covariates
    return finalize_reversed


CHANGES: list[tuple[str, str, dict[str, Any], Patch | None, str]] = [
    ("fast", "load_documents", {"input.encoding": "latin-1"}, None, "input_documents"),
    ("standard", "load_documents", {"input.encoding": "latin-1"}, None, "input_documents"),
    ("fast", "chunk_text", {"chunking.size": 200}, None, "base_text_units"),
    ("standard", "chunk_text", {"chunking.overlap": 0}, None, "base_text_units"),
    ("fast", "extract_graph_nlp", {"extract_graph_nlp.min_entity_frequency": 1}, None, "raw_entities"),
    ("fast", "extract_claims", {"extract_claims.enabled": True}, None, "raw_claims"),
    ("fast", "merge_graph", {}, wrapped("merge_graph", alex_read_as_alex_mercer), "merged_entities"),
    ("standard", "merge_graph", {"entity_resolution.enabled": False}, None, "merged_entities"),
    ("fast", "join_descriptions", {}, wrapped("joined", lambda joined: lambda texts: joined(texts, 100)),
     "summarized_entities"),
    ("fast", "cluster_graph", {"cluster_graph.max_cluster_size": 3}, None, "communities"),
    ("standard", "cluster_graph", {"cluster_graph.max_cluster_size": 3}, None, "communities"),
    ("fast", "finalize_text_units", {}, wrapped("finalize", entity_ids_reversed), "text_units"),
    ("standard", "finalize_text_units", {}, replaced("claim_numbers", lambda claims, _: list(range(len(claims)))[::-1]),
     "covariates"),
    ("fast", "community_reports_extractive", {}, replaced("MAX_FINDINGS", 2), "community_reports"),
    ("standard", "extract_graph", {"extract_graph.max_gleanings": 0}, None, "raw_entities"),
    ("standard", "extract_claims", {"extract_claims.max_completion_tokens": 60}, None, "raw_claims"),
    ("standard", "summarize_descriptions", {"summarize_descriptions.join_max_tokens": 0}, None, "summarized_entities"),
    ("standard", "community_reports", {"community_reports.max_input_length": 500}, None, "community_reports"),
]


def test_every_golden_comparison_has_a_change_that_must_fail_it():
    assert sorted((method, stage) for method, stage, *_ in CHANGES) == sorted(MODEL_FREE + WITH_FAKE_MODEL)


@pytest.mark.parametrize(("method", "stage_name", "settings", "patch", "table"), CHANGES,
                         ids=[f"{c[0]}-{c[1]}" for c in CHANGES])
def test_a_changed_stage_fails_under_its_own_name_and_table(tmp_path, monkeypatch, method, stage_name, settings, patch,
                                                           table):
    if patch is not None:
        patch(sys.modules[STAGES[stage_name].run.__module__], monkeypatch)
    config, _ = project_config(tmp_path / method, method, settings)
    result = run_stage_alone(stage_name, config, golden_inputs(method, stage_name))
    with pytest.raises(AssertionError, match=f"^stage {stage_name}, table {table} "):
        assert_outputs_match(method, stage_name, result)


def test_a_stage_that_reports_otherwise_fails_under_its_own_name(tmp_path):
    """Tables alike, figures not: claims without gleaning find the same claims with the fake model, in half the
    calls, and the stage's details say so."""
    config, _ = project_config(tmp_path / "standard", "standard", {"extract_claims.max_gleanings": 0})
    result = run_stage_alone("extract_claims", config, golden_inputs("standard", "extract_claims"))
    assert_outputs_match("standard", "extract_claims", result)
    with pytest.raises(AssertionError, match=r"^stage extract_claims, its details .*'calls_per_unit': 1\.0"):
        assert_report_matches("standard", "extract_claims", result)


def test_row_order_counts_where_it_is_part_of_a_tables_contract_only():
    def reversed_rows(name: str) -> pd.DataFrame:
        return golden_table("fast", name).iloc[::-1]

    with pytest.raises(AssertionError, match=r"^stage cluster_graph, table entities .*differs"):
        assert_table_matches("cluster_graph", "entities", reversed_rows("entities"), golden_table("fast", "entities"),
                             GOLDEN / "fast")
    assert_table_matches("merge_graph", "merged_entities", reversed_rows("merged_entities"),
                         golden_table("fast", "merged_entities"), GOLDEN / "fast")
