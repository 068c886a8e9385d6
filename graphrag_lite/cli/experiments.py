"""`graphrag-lite experiment run | show` and `eval`: scores of an index, or of many variants of one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from graphrag_lite.cli.common import (
    ConfigOption,
    ExperimentFile,
    ResponseTypeOption,
    RootOption,
    SetOption,
    VerboseOption,
    console,
    errors,
    guarded,
    print_table,
)
from graphrag_lite.errors import ConfigError, IndexIncomplete
from graphrag_lite.query import SEARCH_METHODS


@guarded
def experiment_run(
    file: ExperimentFile,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="estimate the model calls and cost of the whole "
                                          "experiment without calling a model")] = False,
    verbose: VerboseOption = False,
) -> int:
    """Build and evaluate every variant (re-running skips finished work), then print the results table and
    write results.csv, results.parquet and report.md to the experiment's output folder."""
    from graphrag_lite.experiment.run import run_experiment

    if dry_run:
        print_experiment_estimate(file)
        return 0
    table = run_experiment(file, console)
    print_table(table, f"Experiment {file.name}")
    console.print(f"Report: {table.attrs.get('report', '')}", highlight=False)
    return report_failures(table)


def report_failures(table: Any) -> int:
    """Exit code 4 when an index finished with failed items or a question got no answer: named, not hidden."""
    indexes = sorted(set(table.loc[table["index_status"].astype(str).str.contains("failures"), "variant"]))
    failed = table.get("query_failures")
    queries = sorted(set(table.loc[failed > 0, "variant"])) if failed is not None else []
    for what, names in (("indexes finished with failed items (their stats.json lists them) and are scored as they "
                         "are", indexes), ("questions got no answer (results.csv: query_failures)", queries)):
        if names:
            errors.print(f"[red]error:[/red] {', '.join(names)}: {what}; run the same command to retry only what "
                         f"failed (exit code {IndexIncomplete.exit_code})", highlight=False)
    return IndexIncomplete.exit_code if indexes or queries else 0


def print_experiment_estimate(file: Path) -> None:
    from rich.table import Table

    from graphrag_lite.experiment.estimate import estimate_experiment
    from graphrag_lite.experiment.runner import plan_experiment

    plan = plan_experiment(file)
    found = estimate_experiment(plan)
    variants = f"{len(plan.variants)} variants, {len({p.index for p in plan.variants})} distinct indexes"
    if not found.rows and not found.not_estimable:
        console.print(f"{variants}: no model calls (no stage calls a model as configured, and no answers are "
                      "generated). The model-free stages ran; the real run reuses them.", highlight=False)
        return
    listing = Table(title=f"Model calls experiment {file.name} would make (dry run: no model was called)")
    for column in ("what", "calls", "prompt tokens", "cost (est.)"):
        listing.add_column(column, justify="left" if column == "what" else "right")
    for row in found.rows:
        cost = "?" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
        listing.add_row(row["what"], f"{row['calls']:,}", f"{row['prompt_tokens']:,}", cost)
    console.print(listing)
    gleaning = any(r["what"].endswith(("extract_graph", "extract_claims")) for r in found.rows)
    left_out = sorted({name.split(": ")[-1] for name in found.not_estimable})  # "<index>: <stage>"
    counted = "" if not left_out else f" of the stages counted; NOT counted: {', '.join(left_out)}, whose calls " \
        "depend on extraction's answers (with a model they can cost more than the rest: see a run's stats.json)"
    console.print(f"{variants}: {found.calls:,} calls at most, about ${found.cost_usd:.4f}{counted}. Answers are "
                  "counted at the full context budget" + (", and every possible gleaning call" if gleaning else "")
                  + (": upper bounds for what is counted." if found.not_estimable else ": upper bounds."),
                  highlight=False)


@guarded
def experiment_show(file: ExperimentFile, verbose: VerboseOption = False) -> None:
    """Print the results table of an experiment that has run."""
    import pandas as pd

    from graphrag_lite.experiment.run import RESULTS
    from graphrag_lite.experiment.spec import load_spec

    spec = load_spec(file)
    assert spec.output is not None
    if not (spec.output / RESULTS).is_file():
        raise ConfigError(f"no results in {spec.output}; run `graphrag-lite experiment run {file}` first")
    print_table(pd.read_parquet(spec.output / RESULTS), f"Experiment {file.name}")
    console.print(f"Report: {spec.output / 'report.md'}", highlight=False)


@guarded
def evaluate(
    questions: Annotated[Path, typer.Option("--questions", "-q", help="question file: JSONL, JSON or CSV with "
                                            "`question` and optional answers and gold evidence")],
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    methods: Annotated[str, typer.Option("--methods", help="query methods, comma-separated")] = "local,basic",
    answers: Annotated[bool, typer.Option("--answers/--no-answers", help="also generate answers with each "
                                          "method's chat model and score them (questions with answers); "
                                          "default: retrieval scores only, no model call")] = False,
    response_type: ResponseTypeOption = "Single Sentence",
    as_json: Annotated[bool, typer.Option("--json", help="print per-method and per-question results as JSON")
                       ] = False,
    verbose: VerboseOption = False,
) -> int:
    """Score an existing index on a question set: gold evidence recall (beside basic search packed to the
    same budget), answer exact match, token F1 and containment, and each method's calls, tokens and cost."""
    import json
    from dataclasses import asdict

    from graphrag_lite.evaluation.evaluate import evaluate_index, summary_table
    from graphrag_lite.evaluation.questions import load_questions
    from graphrag_lite.query.engine import GraphRAG
    from graphrag_lite.tables import plain_json

    chosen = [m.strip() for m in methods.split(",") if m.strip()]
    if not chosen or any(m not in SEARCH_METHODS for m in chosen):
        raise ConfigError(f"--methods {methods}: choose from {', '.join(SEARCH_METHODS)}")
    asked = load_questions(questions)
    rag = GraphRAG.from_config(root, config, set_ or [])
    results = asyncio.run(evaluate_index(rag, asked, chosen, answers, response_type))
    table = summary_table(results)
    if as_json:
        data = {"methods": table.to_dict("records"), "questions": [asdict(r) for r in results]}
        # NaN (not measured) as null: strict JSON readers reject NaN
        console.print_json(json.dumps(plain_json(data), allow_nan=False))
        return _failed_questions(results)
    print_table(table.rename(columns={"calls": "query_calls", "cost_usd": "query_cost_usd",
                                      "median_s": "query_median_s"}),
                f"{questions.name}: {len(asked)} questions")
    if "global" in chosen and not answers:
        console.print("Global search has no evidence recall (its context is community reports); it is scored "
                      "on answers only: add --answers.", highlight=False)
    if any(q.group for q in asked):
        print_table(summary_table(results, ("method", "group")).rename(columns={"calls": "query_calls"}),
                    "by group")
    return _failed_questions(results)


def _failed_questions(results: Any) -> int:
    failed = [r for r in results if r.failed]
    if not failed:
        return 0
    errors.print(f"[red]error:[/red] {len(failed)} questions got no usable answer ({failed[0].method}, "
                 f"{failed[0].question_id}: {failed[0].problems[0][:200]}); --json lists them all (exit code "
                 f"{IndexIncomplete.exit_code})", highlight=False)
    return IndexIncomplete.exit_code
