"""The experiment from top to bottom: plan every variant, build and evaluate each in turn (with the
running cost), judge answers against the baseline, and write the results table and report."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from graphrag_lite.evaluation.evaluate import QuestionResult, methods_to_run, summary_table
from graphrag_lite.evaluation.judge import judge_pair
from graphrag_lite.experiment.report import write_report
from graphrag_lite.experiment.results import differs_text, index_row, ordered, variant_rows
from graphrag_lite.experiment.runner import (
    ExperimentPlan,
    PlannedVariant,
    VariantRun,
    build_variant_index,
    evaluate_variant,
    plan_experiment,
    remaining_budget,
)
from graphrag_lite.pipeline.display import progress_display
from graphrag_lite.storage import write_json

RESULTS = "results.parquet"
Judged = dict[str, dict[str, list[dict[str, Any]]]]  # variant -> method -> judgments (or judge errors)


def run_experiment(path: str | Path, console: Console | None = None) -> pd.DataFrame:
    """Run (or resume) the experiment in `path`; returns the results table, also written to its output
    folder as results.parquet, results.csv and report.md."""
    console = console or Console(quiet=True)
    plan = plan_experiment(Path(path))
    import graphrag_lite.vector_store  # noqa: F401 - LanceDB's import (1-2 s) is not the first index's time
    plan.output.mkdir(parents=True, exist_ok=True)
    write_json(plan.output / "experiment.json", {
        "file": str(plan.path), "variants": {p.variant.name: {"index": p.index, "overrides": p.variant.overrides}
                                             for p in plan.variants}})
    runs: dict[str, VariantRun] = {}
    evaluations: dict[str, list[QuestionResult]] = {}
    judged: Judged = {}
    built: set[str] = set()
    spent = 0.0
    try:
        for number, planned in enumerate(plan.variants, start=1):
            console.print(f"[bold]── [{number}/{len(plan.variants)}] variant {planned.variant.name}[/bold] "
                          f"({differs_text(planned.variant.own)}) · index {planned.index} · spent so far "
                          f"${spent:.4f}", highlight=False)
            runs[planned.variant.name], results = _run_variant(planned, plan, console, spent, built)
            spent += runs[planned.variant.name].cost_usd
            if results is not None:
                evaluations[planned.variant.name] = results
        if plan.spec.judge and plan.answering:
            judged, cost = asyncio.run(judge_variants(plan, evaluations, console, spent))
            spent += cost
    except BaseException:  # a budget stop, a failure, Ctrl-C: what is finished is written, then the error goes on
        try:
            _write_results(plan, runs, evaluations, judged)
        except Exception as err:  # the first error matters more; this one is still said
            console.print(f"[yellow]! the results of the finished variants could not be written: {err}[/yellow]")
        raise
    table = _write_results(plan, runs, evaluations, judged)
    console.print(f"spent ${spent:.4f} in this run; results in {plan.output}", highlight=False)
    return table


def _run_variant(planned: PlannedVariant, plan: ExperimentPlan, console: Console, spent: float,
                 built: set[str]) -> tuple[VariantRun, list[QuestionResult] | None]:
    """Build the variant's index and evaluate it, each within what is left of the experiment's budget;
    the run's cost_usd is what both paid."""
    planned.config.budget.max_cost_usd = remaining_budget(plan, spent, planned)
    run = build_variant_index(planned, plan, console, built)
    if run.shared_from:
        console.print(f"  started from the finished stages of index {run.shared_from}", highlight=False)
    if not plan.questions:
        return run, None
    planned.config.budget.max_cost_usd = remaining_budget(plan, spent + run.cost_usd, planned)
    total = len(methods_to_run(plan.spec.methods, plan.questions)) * len(plan.questions)
    with counting(console, total, f"{planned.variant.name}: questions") as done:
        results, run.evaluation_reused = asyncio.run(evaluate_variant(planned, plan, done))
    run.cost_usd += 0.0 if run.evaluation_reused else sum(r.paid_usd for r in results)
    console.print(f"  evaluated on {len(plan.questions)} questions"
                  f"{' (unchanged, reused)' if run.evaluation_reused else ''}", highlight=False)
    return run, results


@contextlib.contextmanager
def counting(console: Console, total: int, what: str) -> Iterator[Callable[[], None]]:
    """A progress bar on a terminal (nothing elsewhere); call the yielded function once per item done."""
    with progress_display(console) as progress:
        task = progress.add_task(what, total=total)
        yield lambda: progress.advance(task)


async def judge_variants(plan: ExperimentPlan, evaluations: dict[str, list[QuestionResult]], console: Console,
                         spent: float) -> tuple[Judged, float]:
    """Every variant's answers against the baseline's, per judged method and question, in both orders,
    within what is left of the budget; written to judgments.jsonl (a pair the judge gave no usable verdict
    for is written with its error, and counted). Returns ({variant: {method: judgments}}, cost paid)."""
    from graphrag_lite.llm.errors import LLMCallError
    from graphrag_lite.llm.gateway import Gateway

    judge = plan.spec.judge
    assert judge is not None
    baseline = next(p for p in plan.variants if p.variant.name == judge.baseline)
    config = baseline.config.model_copy(deep=True)
    config.budget.max_cost_usd = remaining_budget(plan, spent, baseline)
    pairs = list(answer_pairs(plan, evaluations))
    gateway = Gateway(config)
    judged: Judged = {}
    try:
        with counting(console, len(pairs), "judging pairs (both orders)") as done:
            for (question_id, method, name), question, answers in pairs:
                labels = (question_id, method, name, judge.baseline)
                try:
                    found = [asdict(j) for j in await judge_pair(gateway, judge.model_id, question, answers,
                                                                 judge.criteria, judge.prompt, labels)]
                except LLMCallError as err:
                    found = [{**dict(zip(("question_id", "method", "variant", "baseline"), labels, strict=True)),
                              "error": str(err)}]
                    console.print(f"  [yellow]! judge: {name} / {method} / {question_id}: {err}[/yellow]")
                judged.setdefault(name, {}).setdefault(method, []).extend(found)
                done()
    finally:
        gateway.close()
    lines = [json.dumps(j, ensure_ascii=False) for methods in judged.values() for js in methods.values() for j in js]
    (plan.output / "judgments.jsonl").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return judged, gateway.ledger.totals()["cost_usd"]


def answer_pairs(plan: ExperimentPlan, evaluations: dict[str, list[QuestionResult]]
                 ) -> Iterator[tuple[tuple[str, str, str], str, tuple[str, str]]]:
    """((question id, method, variant), question, (variant's answer, baseline's answer)) for every judged
    method and question both answered."""
    judge = plan.spec.judge
    assert judge is not None
    answers = {(name, r.method, r.question_id): r.answer for name, rs in evaluations.items() for r in rs if r.answer}
    for planned in plan.variants:
        name = planned.variant.name
        for method in judge.methods if name != judge.baseline else []:
            for question in plan.questions:
                ours = answers.get((name, method, question.id))
                theirs = answers.get((judge.baseline, method, question.id))
                if ours is not None and theirs is not None:
                    yield (question.id, method, name), question.question, (ours, theirs)


def _write_results(plan: ExperimentPlan, runs: dict[str, Any], evaluations: dict[str, list[QuestionResult]],
                   judged: dict[str, dict[str, list[dict[str, Any]]]]) -> pd.DataFrame:
    done = [p for p in plan.variants if p.variant.name in runs]
    indexes = {p.index: index_row(p.index, p.config.output.base_dir) for p in done}  # variants share indexes
    criteria = plan.spec.judge.criteria if plan.spec.judge else []
    rows = [row for p in done for row in variant_rows(
        p.variant.name, differs_text(p.variant.own), len(runs[p.variant.name].stages_run), indexes[p.index],
        evaluations.get(p.variant.name, []), judged.get(p.variant.name, {}), criteria)]
    table = ordered(pd.DataFrame(rows))
    table.to_parquet(plan.output / RESULTS, index=False)
    table.to_csv(plan.output / "results.csv", index=False)
    groups = group_table(evaluations) if any(q.group for q in plan.questions) else None
    if groups is not None:
        groups.to_csv(plan.output / "results_by_group.csv", index=False)
    table.attrs["report"] = str(write_report(plan, table, groups))
    return table


def group_table(evaluations: dict[str, list[QuestionResult]]) -> pd.DataFrame:
    """All-gold per variant and method (rows) and question group (columns)."""
    parts = [summary_table(results, ("method", "group")).assign(variant=name)
             for name, results in evaluations.items() if results]
    if not parts:
        return pd.DataFrame()
    wide = pd.concat(parts).pivot_table(index=["variant", "method"], columns="group", values="all_gold", sort=False)
    return wide.reset_index()
