"""Experiments: variants share indexes and stages, resume without repeating work, judge in both orders,
and bad experiment files are named with the entry that is wrong."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from graphrag_lite.errors import ConfigError
from graphrag_lite.experiment.run import run_experiment
from graphrag_lite.fake import provider as fake
from graphrag_lite.fake.script import scripted
from graphrag_lite.storage import read_json
from tests.conftest import DATA, REPO, make_project

DOCS = sorted((DATA / "unrelated-documents").glob("*.txt"))
QUESTIONS = [
    {"id": "chess", "question": "Who beat Pavel Orlov at the Reykjavik Open?", "answer": "Ivar Sigurdsson",
     "evidence": ["Ivar Sigurdsson, a schoolteacher from Akureyri, beat the Soviet grandmaster Pavel Orlov in the "
                  "final round"], "group": "people"},
    {"id": "chess-doc", "question": "Which chess hall hosted the 1958 tournament?", "answer": "Laugardalsholl",
     "evidence_documents": ["chess.txt"], "group": "places"},
]
EXPERIMENT = """\
project: project
output: results
variants:
  a: {}
  a-k5: {basic_search.k: 5}          # a query setting only: the same index as a
  b: {community_reports.max_length: 300}
questions: questions.jsonl
methods: [local, basic]
answers: true
"""


def make_experiment(root: Path, text: str = EXPERIMENT, questions: list[dict] | None = None) -> Path:
    make_project(root / "project", DOCS, "chunking:\n  size: 200\n  overlap: 20\n")
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions or QUESTIONS))
    path = root / "experiment.yaml"
    path.write_text(text)
    return path


def test_variants_that_differ_in_query_settings_share_one_index_and_later_stages_reuse_earlier_ones(tmp_path):
    table = run_experiment(make_experiment(tmp_path))
    rows = table.set_index(["variant", "method"])
    assert rows.loc[("a", "local"), "index"] == rows.loc[("a-k5", "local"), "index"] != rows.loc[("b", "local"),
                                                                                                  "index"]
    assert rows.loc[("a", "local"), "stages_run"] == 10 and rows.loc[("a-k5", "local"), "stages_run"] == 0
    # b differs only in community_reports: the stages before it came from a's index, unchanged
    assert rows.loc[("b", "local"), "stages_run"] == 2
    b_stats = read_json(tmp_path / "results" / "indexes" / rows.loc[("b", "local"), "index"] / "stats.json")
    ran = [name for name, s in b_stats["stages"].items() if not s["status"].startswith("unchanged")]
    assert ran == ["community_reports", "embed_text"]
    # the fair baseline is always there, and the query-only setting changed what basic search retrieved
    assert set(table["method"]) == {"local", "basic", "basic_packed"}
    assert rows.loc[("a", "basic_packed"), "recall"] == 1.0
    assert rows.loc[("a", "local"), "index_calls"] > 0 and rows.loc[("a", "local"), "index_cost_usd"] > 0
    # per question: the question's embedding and the answer
    assert rows.loc[("a", "local"), "token_f1"] >= 0 and rows.loc[("a", "local"), "query_calls"] == 4
    assert (tmp_path / "results" / "report.md").read_text().count("![") == 2
    assert pd.read_csv(tmp_path / "results" / "results.csv").shape[0] == 9


def test_an_interrupted_experiment_resumes_without_repeating_variants_or_model_calls(tmp_path, monkeypatch):
    from graphrag_lite.stages import STAGES

    clean = run_experiment(make_experiment(tmp_path / "clean"))
    calls_clean = fake.STATS.completions
    fake.reset()
    original = STAGES["community_reports"]
    runs = {"count": 0}

    def interrupted(context):  # the second index's community reports: a Ctrl-C halfway through the experiment
        runs["count"] += 1
        if runs["count"] == 2:
            raise KeyboardInterrupt
        return original.run(context)

    monkeypatch.setitem(STAGES, "community_reports", dataclasses.replace(original, run=interrupted))
    path = make_experiment(tmp_path / "resumed")
    with pytest.raises(KeyboardInterrupt):
        run_experiment(path)
    calls_before = fake.STATS.completions
    monkeypatch.setitem(STAGES, "community_reports", original)
    resumed = run_experiment(path).set_index(["variant", "method"])
    assert resumed.loc[("a", "local"), "stages_run"] == 0 and resumed.loc[("a-k5", "local"), "stages_run"] == 0
    assert resumed.loc[("b", "local"), "stages_run"] == 2  # community_reports and embed_text, nothing earlier
    # the counter runs on through both runs: together they made exactly the calls of one clean run
    assert calls_before < calls_clean and fake.STATS.completions == calls_clean
    columns = ["recall", "all_gold", "token_f1"]
    assert resumed[columns].equals(clean.set_index(["variant", "method"])[columns])


def test_pairwise_judging_runs_both_orders_and_a_position_biased_judge_wins_nothing(tmp_path):
    text = EXPERIMENT + "judge: {baseline: a, methods: [local], criteria: [comprehensiveness, directness]}\n"
    table = run_experiment(make_experiment(tmp_path, text)).set_index(["variant", "method"])
    judgments = [json.loads(line) for line in (tmp_path / "results" / "judgments.jsonl").read_text().splitlines()]
    assert {(j["variant"], j["question_id"], j["order"]) for j in judgments} == {
        (v, q["id"], o) for v in ("a-k5", "b") for q in QUESTIONS for o in ("variant first", "baseline first")}
    for j in judgments:  # the fake judges by content: the same answer wins in both orders
        first = j["winners"]["comprehensiveness"]
        assert j["points"]["comprehensiveness"] == (0.5 if first == 0 else float(
            first == (1 if j["order"] == "variant first" else 2)))
    assert 0 <= table.loc[("b", "local"), "win_overall"] <= 1
    biased = {"comprehensiveness": {"winner": 1, "reason": "first"}, "directness": {"winner": "Answer 1"}}
    shutil.rmtree(tmp_path / "project" / "cache")  # the first judge's verdicts are cached: ask the new one
    with scripted({"judge": "```json\n" + json.dumps(biased) + "\n```"}):
        table = run_experiment(tmp_path / "experiment.yaml").set_index(["variant", "method"])
    assert table.loc[("b", "local"), "win_overall"] == 0.5 and table.loc[("a-k5", "local"), "win_comprehensiveness"] \
        == 0.5


@pytest.mark.parametrize(("text", "questions", "message"), [
    ("varaints: {a: {}}\n", None, r"experiment\.yaml: unknown key 'varaints'; did you mean 'variants'\?"),
    ("variants:\n  small: {chunking.sise: 100}\n", None,
     r"experiment\.yaml, variant 'small': unknown key 'chunking\.sise'; did you mean 'chunking\.size'\?"),
    ("grid:\n  chunking.size: []\n", None, r"experiment\.yaml: grid entry 'chunking\.size' has no values"),
    ("grid: {}\n", None, r"experiment\.yaml: defines no variants"),
    ("variants: {a: {}}\nquestions: questions.jsonl\n", [{"q": "Who?"}],
     r"questions\.jsonl: line 1: no 'question' field with text \(its fields: q\)"),
    ("variants: {a: {}}\njudge: {baseline: z}\n", None, r"judge\.baseline 'z' is not a variant; variants: a"),
    ("variants: {a: {output.base_dir: x}}\n", None, r"variant 'a': 'output\.base_dir' is set by the experiment"),
    ("grid: {chunking.sise: [100]}\njudge: {baseline: sise-100}\n", None,
     r"grid entry 'chunking\.sise': unknown key 'chunking\.sise'; did you mean 'chunking\.size'\?"),
])
def test_bad_experiment_files_name_the_file_and_the_entry(tmp_path, text, questions, message):
    path = make_experiment(tmp_path, "project: project\n" + text, questions)
    with pytest.raises(ConfigError, match=message):
        run_experiment(path)


def test_the_shipped_example_runs_with_no_model_and_a_rerun_runs_no_stage(tmp_path, cli):
    for name in ("settings.yaml", "input"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copyfile)(source, tmp_path / name)
    shutil.copytree(REPO / "experiments", tmp_path / "experiments", ignore=shutil.ignore_patterns("*-results"))
    first = cli("experiment", "run", tmp_path / "experiments" / "example.yaml")
    assert first.exit_code == 0, first.output
    again = cli("experiment", "run", tmp_path / "experiments" / "example.yaml")
    table = pd.read_csv(tmp_path / "experiments" / "example-results" / "results.csv")
    assert again.exit_code == 0 and set(table["stages_run"]) == {0} and "basic_packed" in set(table["method"])
    assert "✓" not in again.output and (tmp_path / "experiments" / "example-results" / "quality_vs_cost.png").is_file()
    shown = cli("experiment", "show", tmp_path / "experiments" / "example.yaml")
    assert shown.exit_code == 0 and "size-200_min_npmi-0.3" in shown.output


def test_a_dry_run_estimates_the_whole_experiment_counting_a_shared_stage_once_and_calls_no_model(tmp_path, cli):
    path = make_experiment(tmp_path, EXPERIMENT + "judge: {baseline: a}\n")
    shown = cli("experiment", "run", path, "--dry-run")
    assert shown.exit_code == 0, shown.output
    assert fake.STATS.completions == 0 and fake.STATS.embeddings == 0
    from graphrag_lite.experiment.estimate import estimate_experiment
    from graphrag_lite.experiment.runner import plan_experiment

    found = estimate_experiment(plan_experiment(path))
    extraction = [r for r in found.rows if r["what"].endswith("extract_graph") or "extract_graph (" in r["what"]]
    assert [r["calls"] > 0 for r in extraction] == [True, False]  # b's extraction is a's: counted once
    judge = next(r for r in found.rows if r["what"].startswith("judge"))
    assert judge["calls"] == 2 * 2 * len(QUESTIONS)  # both orders, 2 variants against the baseline
    assert found.cost_usd > 0 and "summarize_descriptions" in " ".join(found.not_estimable)
    # the headline says which stages its "at most" leaves out (a new user read it as the whole run's bound)
    headline = " ".join(shown.output.split())
    assert "of the stages counted; NOT counted: community_reports, embed_text, summarize_descriptions" in headline


def test_the_budget_covers_the_whole_experiment_and_finished_variants_are_kept(tmp_path, cli):
    text = EXPERIMENT.replace("community_reports.max_length: 300", "chunking.size: 150")  # b: a second extraction
    clean = run_experiment(make_experiment(tmp_path / "clean", text)).set_index(["variant", "method"])
    first_variant = clean.loc[("a", "local"), "index_cost_usd"] + clean.loc[("a", "local"), "query_cost_usd"] + \
        clean.loc[("a", "basic"), "query_cost_usd"]
    assert clean.loc[("b", "local"), "index_cost_usd"] > 0.5 * first_variant
    fake.reset()
    path = make_experiment(tmp_path / "limited", text + f"budget: {{max_cost_usd: {first_variant * 1.4}}}\n")
    stopped = cli("experiment", "run", path)
    assert stopped.exit_code == 3 and "budget" in stopped.output
    kept = pd.read_csv(tmp_path / "limited" / "results" / "results.csv")
    assert {"a", "a-k5"} <= set(kept["variant"]) and "b" not in set(kept["variant"])


def test_build_index_takes_a_project_folder_or_a_config_with_overrides(tmp_path):
    from graphrag_lite import build_index
    from graphrag_lite.config import load_config

    root = make_project(tmp_path, DOCS, "extract_graph_nlp:\n  min_entity_frequency: 1\n")
    summary = build_index(root, {"chunking.size": 80}, method="fast")
    assert summary.status == "completed" and summary.stages["chunk_text"]["rows_out"]["base_text_units"] > 5
    # a config object is taken as it is: the fast method's recommended settings (overlap 30) are not applied
    again = build_index(load_config(root), ["chunking.size=80", "chunking.overlap=30", "extract_claims.enabled=false",
                                            "embed_text.model_id=null"], method="fast")
    assert again.status == "unchanged"
    with pytest.raises(ConfigError, match="chunking"):
        build_index(root, {"chunking.size": "big"}, method="fast")


def test_a_judge_answers_questions_without_gold_answers_and_a_reply_it_cannot_use_is_counted(tmp_path):
    questions = [{k: v for k, v in q.items() if k != "answer"} for q in QUESTIONS]
    text = EXPERIMENT.replace("answers: true\n", "") + "judge: {baseline: a, criteria: [Accuracy]}\n"
    path = make_experiment(tmp_path, text, questions)
    with scripted({"judge": '{"accuracy": {"winner": 1.0, "reason": "x"}}'}):
        table = run_experiment(path).set_index(["variant", "method"])
    assert table.loc[("b", "local"), "win_Accuracy"] == 0.5 and table.loc[("b", "local"), "judge_failures"] == 0
    assert table.loc[("b", "local"), "judge_calls"] == 2 * len(QUESTIONS) and table.loc[("b", "local"),
                                                                                        "judge_cost_usd"] > 0
    shutil.rmtree(tmp_path / "project" / "cache")  # the first judge's verdicts are cached: ask the new one
    with scripted({"judge": "I am sorry, I cannot compare these answers."}):
        table = run_experiment(path).set_index(["variant", "method"])
    assert table.loc[("b", "local"), "judge_failures"] == len(QUESTIONS)
    errors = [json.loads(line) for line in (tmp_path / "results" / "judgments.jsonl").read_text().splitlines()]
    assert len(errors) == 2 * len(QUESTIONS) and all("error" in e for e in errors)


def test_an_evaluation_is_redone_when_only_the_vector_store_of_its_index_changed(tmp_path):
    path = make_experiment(tmp_path, "project: project\noutput: results\nvariants:\n  x: {}\n"
                                     "questions: questions.jsonl\n")
    run_experiment(path)
    stored = tmp_path / "results" / "variants" / "x" / "evaluation.json"
    before = read_json(stored)
    path.write_text(path.read_text().replace("x: {}", "x: {embed_text.model_id: null}"))
    run_experiment(path)
    after = read_json(stored)
    assert after["key"] != before["key"]
    calls = {r["method"]: r["calls"] for r in after["results"] if r["question_id"] == "chess"}
    assert calls["local"] == 0  # no vectors now: the question is not embedded


def test_a_shared_index_with_failed_items_is_built_once_per_run_and_the_exit_code_says_so(tmp_path, cli):
    path = make_experiment(tmp_path)
    settings = tmp_path / "project" / "settings.yaml"
    settings.write_text(settings.read_text().replace("model: fake/default", "model: fake/default?server_error=0.3")
                        .replace("max_retry_wait: 0.01", "max_retry_wait: 0.01\n    max_retries: 0")
                        + "extract_graph:\n  max_failed_share: 1.0\n")
    done = cli("experiment", "run", path)
    table = pd.read_csv(tmp_path / "results" / "results.csv").set_index(["variant", "method"])
    assert done.exit_code == 4 and "finished with failed items" in done.output
    assert "failures" in table.loc[("a", "local"), "index_status"]
    assert table.loc[("a-k5", "local"), "stages_run"] == 0  # scored on the very tables a was scored on
    assert table.loc[("a", "local"), "entities"] == table.loc[("a-k5", "local"), "entities"]


def test_the_projects_own_budget_still_applies_inside_an_experiment(tmp_path, cli):
    path = make_experiment(tmp_path, EXPERIMENT.replace("variants:", "base: {budget.max_cost_usd: 0.0001}\nvariants:"))
    assert cli("experiment", "run", path).exit_code == 3


def test_text_unit_gold_is_refused_when_variants_chunk_differently(tmp_path):
    questions = [{"question": "Who won?", "evidence_text_units": ["3"]}]
    text = "project: project\nvariants:\n  a: {}\n  b: {chunking.size: 100}\nquestions: questions.jsonl\n"
    with pytest.raises(ConfigError, match="evidence_text_units name text units of one index"):
        run_experiment(make_experiment(tmp_path, text, questions))


def test_small_costs_print_in_plain_decimals():
    """A new user saw `7e-06` beside `0.0023` in the experiment's tables."""
    from graphrag_lite.experiment.report import format_value

    assert [format_value(v) for v in (7e-06, 0.0023, 0.00999, 0.5)] == ["0.000007", "0.0023", "0.01", "0.500"]


def test_the_docs_say_how_grid_variants_are_named():
    """A new user could not find where `size-600` came from: docs/experiments.md's examples are grid_name's."""
    import re

    from graphrag_lite.experiment.spec import grid_name
    from tests.conftest import REPO

    text = (REPO / "docs" / "experiments.md").read_text(encoding="utf-8").split("## Variant names")[1]
    examples = re.findall(r"`([\w.]+): ([\w.]+)` gives\s+`([\w.-]+)`", text.split("##")[0])
    assert len(examples) == 2
    for key, value, name in examples:
        assert grid_name({key: float(value) if "." in value else int(value)}) == name
