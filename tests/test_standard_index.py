"""The standard method end to end with the fake model, on Operation Dulce (Microsoft GraphRAG's test text)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from tests.conftest import DATA, check_index, make_project

DULCE = DATA / "operation-dulce" / "dulce.txt"
REFERENCE = DATA / "operation-dulce" / "reference_output_v2"
CONTRACT = {  # GraphRAG's columns we promise (../shared/reference/graphrag-compat.md)
    "documents": ["id", "human_readable_id", "title", "text", "text_unit_ids", "creation_date"],
    "text_units": ["id", "human_readable_id", "text", "n_tokens", "document_id", "entity_ids", "relationship_ids",
                   "covariate_ids"],
    "entities": ["id", "human_readable_id", "title", "type", "description", "text_unit_ids", "frequency", "degree"],
    "relationships": ["id", "human_readable_id", "source", "target", "description", "weight", "combined_degree",
                      "text_unit_ids"],
    "communities": ["id", "human_readable_id", "community", "level", "parent", "children", "title", "entity_ids",
                    "relationship_ids", "text_unit_ids", "period", "size"],
    "covariates": ["id", "human_readable_id", "covariate_type", "type", "description", "subject_id", "object_id",
                   "status", "start_date", "end_date", "source_text", "text_unit_id"],
}


def index(root, *args):
    result = CliRunner().invoke(app, ["index", "--root", str(root), *args], catch_exceptions=False)
    return result


DULCE_SETTINGS = "extract_claims:\n  enabled: true\ncluster_graph:\n  max_cluster_size: 5\n"  # nests on this text


@pytest.fixture(scope="module")
def dulce(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("dulce"), [DULCE], DULCE_SETTINGS)
    result = index(root)
    assert result.exit_code == 0, result.output
    return root


def table(root, name):
    return pd.read_parquet(root / "output" / f"{name}.parquet")


@pytest.mark.parametrize("name", sorted(CONTRACT))
def test_tables_have_graphrag_columns_and_types(dulce, name):
    ours, reference = table(dulce, name), pd.read_parquet(REFERENCE / f"{name}.parquet")
    assert list(ours.columns[: len(CONTRACT[name])]) == CONTRACT[name]
    for column in CONTRACT[name]:
        if column in reference.columns:
            assert ours[column].dtype.kind == reference[column].dtype.kind or \
                {ours[column].dtype.kind, reference[column].dtype.kind} <= {"O", "T", "U"}, column
            if reference[column].dtype == object and len(ours):  # list columns hold lists
                sample = ours[column].iloc[0]
                assert isinstance(sample, str) == isinstance(reference[column].iloc[0], str), column


def test_real_content_and_one_node_per_agent(dulce):
    entities = table(dulce, "entities")
    titles = set(entities["title"])
    assert {"ALEX MERCER", "TAYLOR CRUZ", "JORDAN HAYES", "SAM RIVERA"} <= titles
    assert not {"MERCER", "CRUZ", "HAYES", "RIVERA", "AGENT CRUZ"} & titles  # aliases resolved
    aliases = table(dulce, "entity_aliases")
    assert {"CRUZ", "AGENT CRUZ"} <= set(aliases[aliases["title"] == "TAYLOR CRUZ"]["alias"])
    assert (entities["description"].str.len() > 0).all()
    assert len(table(dulce, "relationships")) > 10 and len(table(dulce, "covariates")) > 0


def test_communities_nest_correctly(dulce):
    communities = table(dulce, "communities")
    by_id = {int(c): row for c, row in zip(communities["community"], communities.to_dict("records"), strict=True)}
    assert communities["level"].max() >= 1
    for number, row in by_id.items():
        if row["parent"] == -1:
            assert row["level"] == 0
            continue
        parent = by_id[int(row["parent"])]
        assert parent["level"] == row["level"] - 1 and number in list(parent["children"])
        assert set(row["entity_ids"]) <= set(parent["entity_ids"])
    entity_ids = set(table(dulce, "entities")["id"])
    assert all(set(ids) <= entity_ids for ids in communities["entity_ids"])


def test_text_units_link_to_entities_relationships_and_claims(dulce):
    units = table(dulce, "text_units")
    assert all(len(ids) for ids in units["entity_ids"])
    covariates = table(dulce, "covariates")
    assert set(covariates["text_unit_id"]) <= set(units["id"])
    assert sum(len(ids) for ids in units["covariate_ids"]) == len(covariates)


def test_shared_checker_finds_no_problem(dulce):
    code, output = check_index(dulce / "output")
    assert code == 0, output


def test_rebuild_gives_identical_ids(dulce, tmp_path):
    again = make_project(tmp_path / "again", [DULCE], DULCE_SETTINGS)
    assert index(again).exit_code == 0
    for name in ("documents", "text_units", "entities", "relationships", "communities", "covariates"):
        assert table(again, name)["id"].tolist() == table(dulce, name)["id"].tolist(), name


def test_stats_record_llm_usage_per_stage(dulce):
    stats = json.loads((dulce / "output" / "stats.json").read_text())
    llm = stats["stages"]["extract_graph"]["llm"]
    assert llm["calls"] == 10 and llm["prompt_tokens"] > 0 and llm["failures"] == 0  # 5 units, 1 gleaning
    assert stats["stages"]["summarize_descriptions"]["llm"]["calls"] > 0
    assert stats["llm"]["calls"] >= llm["calls"]
    # the time to start LiteLLM is charged to the first stage that needed a model, and says so
    started = [name for name, stage in stats["stages"].items() if "model_client_start_s" in stage]
    assert started == ["extract_graph"]
    assert 0 <= stats["stages"]["extract_graph"]["model_client_start_s"] <= stats["stages"]["extract_graph"]["wall_s"]


def test_a_run_charges_starting_the_model_client_to_its_own_first_model_stage(tmp_path):
    root = make_project(tmp_path, [DULCE])
    assert index(root).exit_code == 0
    assert index(root, "--from", "community_reports").exit_code == 0
    stages = json.loads((root / "output" / "stats.json").read_text())["stages"]
    # extract_graph, reused, keeps the figures of the run that made it, but not a start this run did not pay
    assert stages["extract_graph"]["status"] == "unchanged, reused"
    assert [name for name, stage in stages.items() if "model_client_start_s" in stage] == ["community_reports"]


def test_second_run_calls_no_model(dulce):
    result = index(dulce, "--force")
    assert result.exit_code == 0
    stats = json.loads((dulce / "output" / "stats.json").read_text())
    assert stats["llm"]["cache_hits"] == stats["llm"]["calls"] > 0


def test_failed_chunks_are_counted_and_retried_on_the_next_run(tmp_path):
    root = make_project(tmp_path, [DULCE], chat="fake/default?server_error=0.5&seed=3")
    (root / "settings.yaml").write_text((root / "settings.yaml").read_text().replace(
        "max_retry_wait: 0.01", "max_retry_wait: 0.01\n    max_retries: 1"))
    first = index(root)
    assert first.exit_code == 4, first.output  # finished, with failed items: tables kept, a distinct code
    assert "finished with failures in extract_graph" in first.output
    stats = json.loads((root / "output" / "stats.json").read_text())
    assert stats["status"] == "completed with failures"
    extract = stats["stages"]["extract_graph"]
    failed = extract["details"]["failed_text_units"]
    partly = extract["details"]["partly_extracted_text_units"]  # a failed gleaning keeps the first pass
    assert failed > 0 and len(extract["problems"]) == failed + partly
    assert extract["status"].startswith("ran with failures")
    assert "extraction failed" in first.output
    # the next run, with a healthy model, re-runs the stage; only the failed units reach the model
    (root / "settings.yaml").write_text((root / "settings.yaml").read_text().replace(
        "max_retries: 1", "max_retries: 12"))  # same model (same cache keys), patient enough to get through
    second = index(root)
    assert second.exit_code == 0
    stats = json.loads((root / "output" / "stats.json").read_text())
    assert stats["stages"]["extract_graph"]["details"]["failed_text_units"] == 0
    # the good units make no call; a partly extracted one gets its first pass from the cache
    assert stats["stages"]["extract_graph"]["llm"]["cache_hits"] >= 2 * (5 - failed - partly) + partly


def test_graphml_export(dulce, tmp_path):
    import igraph as ig

    target = tmp_path / "g.graphml"
    result = CliRunner().invoke(app, ["export", "graphml", "--root", str(dulce), "--out", str(target)])
    assert result.exit_code == 0, result.output
    graph = ig.Graph.Read_GraphML(str(target))
    assert graph.vcount() == len(table(dulce, "entities")) and graph.ecount() == len(table(dulce, "relationships"))
    assert "ALEX MERCER" in graph.vs["title"] and graph.es[0]["weight"] > 0


def test_show_summarizes_the_index(dulce):
    result = CliRunner().invoke(app, ["show", "--root", str(dulce)])
    assert result.exit_code == 0, result.output
    assert "ALEX MERCER" in result.output and "Communities per level" in result.output


def test_json_extraction_mode_end_to_end(tmp_path):
    root = make_project(tmp_path, [DULCE], "extract_graph:\n  format: json\n")
    assert index(root).exit_code == 0
    titles = set(table(root, "entities")["title"])
    assert {"ALEX MERCER", "TAYLOR CRUZ", "JORDAN HAYES", "SAM RIVERA"} <= titles
    assert check_index(root / "output")[0] == 0


@pytest.mark.parametrize("method", ["standard", "fast"])
def test_every_index_table_has_the_schemas_columns_and_kinds(tmp_path, cli, method):
    """The schema module (tables.INDEX_TABLES) is what a standard and a fast index hold, claims off (an empty
    covariates table included: its ids are integers, not pandas' float guess for an empty column)."""
    from graphrag_lite.tables import INDEX_TABLES
    from tests.conftest import DATA, make_project

    root = make_project(tmp_path / "p", [DATA / "operation-dulce" / "dulce.txt"])
    assert cli("index", "--root", str(root), "--method", method).exit_code == 0
    for name in INDEX_TABLES:
        table = pd.read_parquet(root / "output" / f"{name}.parquet")
        assert not schema_problems(name, table), (name, schema_problems(name, table))


def schema_problems(name: str, frame: pd.DataFrame) -> list[str]:
    """How an index table departs from INDEX_TABLES: missing columns, columns of another kind."""
    from graphrag_lite.tables import INDEX_TABLES

    problems = []
    for column, kind in INDEX_TABLES[name].items():
        if column not in frame.columns:
            problems.append(f"{name}.{column} is missing")
        elif not _is_kind(frame[column], kind):
            problems.append(f"{name}.{column} is {frame[column].dtype}, not {kind}")
    return problems


def _is_kind(column: pd.Series, kind: str) -> bool:
    if kind == "int":
        return pd.api.types.is_integer_dtype(column)
    if kind == "float":
        return pd.api.types.is_float_dtype(column)
    if kind == "str":  # a text column may hold None where a value is absent (a claim's dates)
        return pd.api.types.is_string_dtype(column) or all(isinstance(v, str) for v in column.dropna())
    if kind == "list":
        return all(isinstance(v, list | tuple | np.ndarray) for v in column)
    return True
