"""--dry-run estimates against the calls a real run makes, and a budget that stops a run and lets it continue."""

import json

from typer.testing import CliRunner

from graphrag_lite.cli import app
from tests.conftest import DATA, SAMPLE, make_project

DULCE = DATA / "operation-dulce" / "dulce.txt"


def index(root, *args):
    return CliRunner().invoke(app, ["index", "--root", str(root), *args], catch_exceptions=False)


def stats(root):
    return json.loads((root / "output" / "stats.json").read_text())


def test_dry_run_calls_no_model_and_matches_the_real_run(tmp_path):
    from graphrag_lite.fake.provider import STATS

    root = make_project(tmp_path, [DULCE], "extract_claims:\n  enabled: true\n")
    STATS.reset()
    dry = index(root, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert STATS.completions == 0 and "Not estimable before they run" in dry.output
    estimate = json.loads((root / "output" / "dry_run.json").read_text())
    assert index(root).exit_code == 0
    real = stats(root)["stages"]
    for stage in ("extract_graph", "extract_claims"):
        predicted, made = estimate[stage], real[stage]["llm"]
        assert predicted["calls"] == 5  # one per text unit, certain
        assert predicted["calls"] <= made["calls"] <= predicted["calls"] + predicted["up_to_extra_calls"]
    # the model-free stages a dry run performed were reused by the real run
    assert real["chunk_text"]["status"] == "unchanged, reused"


def test_a_dry_run_leaves_an_existing_index_exactly_as_it_was(tmp_path):
    root = make_project(tmp_path, [DULCE])
    assert index(root).exit_code == 0
    before = {p.name: p.read_bytes() for p in (root / "output").glob("*.parquet")}
    state = (root / "output" / "pipeline_state.json").read_bytes()
    # other chunking: a real run would rewrite documents and text units; the dry run must not
    dry = index(root, "--dry-run", "--set", "chunking.size=300")
    assert dry.exit_code == 0, dry.output
    assert {p.name: p.read_bytes() for p in (root / "output").glob("*.parquet")} == before
    assert (root / "output" / "pipeline_state.json").read_bytes() == state
    assert json.loads((root / "output" / "dry_run.json").read_text())["extract_graph"]["calls"] > 5
    assert not list(tmp_path.rglob(".graphrag-lite-dry-run-*"))  # the scratch copy is gone
    # with the settings the index was built with, nothing would run: nothing is estimated
    same = index(root, "--dry-run")
    assert same.exit_code == 0 and "Unchanged since the last run, so skipped with no call: load_documents" in \
        same.output
    assert all("calls" not in found for found in json.loads((root / "output" / "dry_run.json").read_text()).values())


def test_dry_run_prompt_tokens_of_certain_calls_are_counted_exactly(tmp_path):
    root = make_project(tmp_path, [DULCE], "extract_graph:\n  max_gleanings: 0\n")
    assert index(root, "--dry-run").exit_code == 0
    predicted = json.loads((root / "output" / "dry_run.json").read_text())["extract_graph"]
    assert predicted["up_to_extra_calls"] == 0
    assert index(root).exit_code == 0
    made = stats(root)["stages"]["extract_graph"]["llm"]
    assert made["calls"] == predicted["calls"] == 5
    assert abs(made["prompt_tokens"] - predicted["prompt_tokens"]) <= 0.01 * made["prompt_tokens"]


def test_budget_stops_the_run_and_a_rerun_continues(tmp_path):
    from graphrag_lite.fake.provider import STATS

    # room for the early embeddings and two or three extractions, each reserving its longest answer (8,000)
    root = make_project(tmp_path, [DULCE], "budget:\n  max_tokens: 30000\n")
    (root / "settings.yaml").write_text((root / "settings.yaml").read_text().replace(
        "max_retry_wait: 0.01", "max_retry_wait: 0.01\n    concurrency: 1"))
    STATS.reset()
    stopped = index(root)
    assert stopped.exit_code == 3
    assert "budget reached" in stopped.output and "during stage extract_graph" in stopped.output
    run = stats(root)
    assert run["status"] == "budget reached"
    assert run["stages"]["extract_graph"]["status"] == "stopped by budget"
    assert run["stages"]["chunk_text"]["status"] == "ran"
    sent_before = STATS.completions
    assert 0 < sent_before < 10
    finished = index(root, "--set", "budget.max_tokens=10000000")
    assert finished.exit_code == 0, finished.output
    run = stats(root)
    assert run["status"] == "completed"
    assert run["stages"]["chunk_text"]["status"] == "unchanged, reused"
    assert run["stages"]["extract_graph"]["llm"]["cache_hits"] == sent_before  # every finished call was kept


def test_a_dry_run_counts_the_calls_other_settings_add_to_a_cached_index(tmp_path):
    """First answers in the cache are free, but the gleanings another gleaning setting asks for are not; and
    when only embed_text would run, its texts are estimated (report texts, once added to embed_text.names)."""
    root = make_project(tmp_path, [DULCE])
    assert index(root).exit_code == 0
    history = ["--set", "extract_graph.gleaning=history"]
    assert index(root, "--dry-run", *history).exit_code == 0
    estimate = json.loads((root / "output" / "dry_run.json").read_text())["extract_graph"]
    assert estimate["calls"] == 0 and estimate["up_to_extra_calls"] == 5  # five units, one new gleaning each
    assert estimate["estimated_extra_prompt_tokens"] > 0 and estimate["estimated_cost_usd"] > 0
    assert "5 of them need only their gleanings" in estimate["note"]
    assert index(root, *history).exit_code == 0
    made = stats(root)["stages"]["extract_graph"]["llm"]
    assert made["calls"] - made["cache_hits"] == 5
    # a second gleaning: the cached first one is followed by a yes/no check the cache does not hold
    more = [*history, "--set", "extract_graph.max_gleanings=2"]
    assert index(root, "--dry-run", *more).exit_code == 0
    second = json.loads((root / "output" / "dry_run.json").read_text())["extract_graph"]
    assert second["calls"] == 0 and second["up_to_extra_calls"] == 15 and second["estimated_cost_usd"] > 0
    assert index(root, *more).exit_code == 0
    made = stats(root)["stages"]["extract_graph"]["llm"]
    assert 5 <= made["calls"] - made["cache_hits"] <= 15
    # a setting that makes the stage run again but asks nothing new: every call, gleanings too, is cached
    assert index(root, "--dry-run", *more, "--set", "extract_graph.require_grounding=false").exit_code == 0
    again = json.loads((root / "output" / "dry_run.json").read_text())["extract_graph"]
    assert (again["calls"], again["up_to_extra_calls"], again["estimated_cost_usd"]) == (0, 0, 0)

    reports = ["--set", "embed_text.names=[entity_description, text_unit_text, community_full_content]", *more]
    dry = index(root, "--dry-run", *reports)
    assert dry.exit_code == 0 and "Not estimable" not in dry.output, dry.output
    embed = json.loads((root / "output" / "dry_run.json").read_text())["embed_text"]
    assert embed["calls"] == 1 and embed["prompt_tokens"] > 0
    assert index(root, *reports).exit_code == 0
    made = stats(root)["stages"]["embed_text"]["llm"]
    assert (made["calls"] - made["cache_hits"], made["prompt_tokens"]) == (embed["calls"], embed["prompt_tokens"])


def test_after_a_dry_run_in_a_new_folder_show_says_there_is_no_index_yet(tmp_path):
    root = make_project(tmp_path, [DULCE])
    assert index(root, "--dry-run").exit_code == 0
    shown = CliRunner().invoke(app, ["show", "--root", str(root)])
    assert shown.exit_code == 2 and "no index in" in shown.output and "(only documents" in shown.output, shown.output
    assert "graphrag-lite index --root" in shown.output


def test_a_dry_run_in_a_copied_project_finds_the_index_unchanged_as_the_real_run_does(tmp_path):
    """In a copy, the input files' paths differ, so documents are read again; they come out the same, and the
    real run skips every later stage: so does the dry run (it judges them by what the stages it ran gave)."""
    import shutil

    original = make_project(tmp_path / "original", [DULCE])
    assert index(original).exit_code == 0
    root = tmp_path / "copy"
    shutil.copytree(original, root)
    shutil.rmtree(root / "cache")  # nothing may come from answers: the real run below must call no model
    assert index(root, "--dry-run").exit_code == 0
    estimates = json.loads((root / "output" / "dry_run.json").read_text())
    model_stages = ("extract_graph", "summarize_descriptions", "community_reports")
    assert all(estimates[s]["note"].startswith("unchanged") for s in model_stages), estimates
    # the stages it ran itself say so (extract_claims is disabled: no model), not "unchanged since the last run"
    assert {s for s, found in estimates.items() if found.get("note", "").startswith("needs no model")} == {
        "load_documents", "chunk_text", "extract_claims"}, estimates
    # embed_text runs again (its settings name the LanceDB by its absolute place) but finds every row kept
    assert estimates["embed_text"].get("calls", 0) == 0, estimates["embed_text"]
    assert index(root).exit_code == 0
    ran = {name: stage for name, stage in stats(root)["stages"].items() if stage["status"] != "unchanged, reused"}
    assert set(ran) <= {"load_documents", "chunk_text", "embed_text"}, ran
    assert not any((stage.get("llm") or {}).get("calls") for stage in ran.values()), ran


# a first extraction answer as real models often give it: in a code fence
FENCED_FIRST_ANSWER = ("```\n(\"entity\"<|>ALEX MERCER<|>PERSON<|>An agent)##(\"entity\"<|>TAYLOR CRUZ<|>PERSON<|>"
                       "An agent)##(\"relationship\"<|>TAYLOR CRUZ<|>ALEX MERCER<|>Cruz questions Mercer<|>7)"
                       "<|COMPLETE|>\n```")


def test_a_dry_run_follows_cached_real_model_replies_to_the_end_of_each_unit(tmp_path):
    """What real models answer is what the cache holds: a fenced first answer, prose with no records to a
    gleaning, a check answered in words. The dry run reads them as the run did: when the check said no, every
    call is cached, even for a third gleaning; when it said yes, the run went on to a second gleaning, and a
    third asks a check the cache does not hold."""
    from graphrag_lite.fake.script import scripted

    for check, still_to_make in (("**No**, nothing more remains.", 0), ("Y", 5)):
        # history: each follow-up carries the answers before it, so a third gleaning's check is a new call
        root = make_project(tmp_path / check[:2], [DULCE], "extract_graph:\n  max_gleanings: 2\n  gleaning: history\n")
        with scripted({"extract_graph.extract": FENCED_FIRST_ANSWER,
                       "extract_graph.glean": "I found no further entities.", "extract_graph.check": check}):
            assert index(root).exit_code == 0
        assert index(root, "--dry-run", "--set", "extract_graph.max_gleanings=3").exit_code == 0
        estimate = json.loads((root / "output" / "dry_run.json").read_text())["extract_graph"]
        assert estimate["calls"] == 0 and estimate["up_to_extra_calls"] == still_to_make * 5, (check, estimate)


def test_a_dry_run_follows_cached_real_model_replies_in_compact_gleaning(tmp_path):
    """Compact gleaning (the default) with the replies real models give: a fenced first answer, then prose
    with no records to the gleaning. That gleaning named nothing new, so the unit ended there: the dry run
    reads the same from the cache and asks for nothing more, even with a third gleaning allowed."""
    from graphrag_lite.fake.script import scripted

    root = make_project(tmp_path, [DULCE], "extract_graph:\n  max_gleanings: 2\n")
    with scripted({"extract_graph.extract": FENCED_FIRST_ANSWER, "extract_graph.glean": "I found no further entities.",
                   "extract_graph.check": "Y"}):
        assert index(root).exit_code == 0
    assert index(root, "--dry-run", "--set", "extract_graph.max_gleanings=3").exit_code == 0
    estimate = json.loads((root / "output" / "dry_run.json").read_text())["extract_graph"]
    assert (estimate["calls"], estimate["up_to_extra_calls"]) == (0, 0), estimate
    assert index(root, "--dry-run", "--set", "extract_graph.gleaning=history").exit_code == 0
    history = json.loads((root / "output" / "dry_run.json").read_text())["extract_graph"]
    assert history["up_to_extra_calls"] > 0  # other follow-ups: not in the cache


def test_a_cost_budget_is_a_cap_with_25_calls_in_flight(tmp_path):
    """The fake's extraction answers run several times longer than their prompts: a budget that reserved an
    answer as long as the prompt let 25 calls in flight take the sample's run 82% past a $0.03 cap. Each call
    now reserves its longest answer (max_tokens), so the run stops at or under the cap and says what it spent."""
    cap = 0.03
    root = make_project(tmp_path, SAMPLE, f"budget:\n  max_cost_usd: {cap}\n")
    stopped = index(root)
    assert stopped.exit_code == 3, stopped.output
    spent = stats(root)["llm"]["cost_usd"]
    assert 0.5 * cap < spent <= 1.05 * cap
    assert f"${spent:.4f} spent (" in stopped.output.replace("\n", "")
    assert "early work $" in stopped.output.replace("\n", "")  # the text units' early embeddings, named


def test_without_a_budget_no_warning_about_answers_it_cannot_bound(tmp_path):
    """The worst-case reservation's warning (a call without max_tokens, a model the price map lacks) is
    about the budget: a run without one must not print it into its log."""
    root = make_project(tmp_path, [DULCE])
    assert index(root).exit_code == 0
    log = (root / "output" / "logs" / "index.log").read_text(encoding="utf-8")
    assert "calls without a longest answer" not in log
