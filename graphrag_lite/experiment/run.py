"""The experiment from top to bottom: plan every variant, build and evaluate each in turn (with the
running cost), judge answers against the baseline, and write the results table and report."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from graphrag_lite.evaluation.evaluate import QuestionResult
from graphrag_lite.evaluation.judge import judge_pair
from graphrag_lite.experiment.report import write_report
from graphrag_lite.experiment.results import differs_text, ordered, variant_rows
from graphrag_lite.experiment.runner import (
    ExperimentPlan,
    PlannedVariant,
    VariantRun,
    build_variant_index,
    evaluate_variant,
    plan_experiment,
    remaining_budget,
)
from graphrag_lite.llm.ledger import BudgetExceeded
from graphrag_lite.storage import write_json

RESULTS = "results.parquet"


def run_experiment(path: str | Path, console: Console | None = None) -> pd.DataFrame:
    """Run (or resume) the experiment in `path`; returns the results table, also written to its output
    folder as results.parquet, results.csv and report.md."""
    console = console or Console(quiet=True)
    plan = plan_experiment(Path(path))
    plan.output.mkdir(parents=True, exist_ok=True)
    write_json(plan.output / "experiment.json", {
        "file": str(plan.path), "variants": {p.variant.name: {"index": p.index, "overrides": p.variant.overrides}
                                             for p in plan.variants}})
    answer = plan.spec.answers and (any(q.answers for q in plan.questions) or plan.spec.judge is not None)
    runs: dict[str, VariantRun] = {}
    evaluations: dict[str, list[QuestionResult]] = {}
    spent = 0.0
    try:
        for number, planned in enumerate(plan.variants, start=1):
            console.rule(f"[{number}/{len(plan.variants)}] variant {planned.variant.name} "
                         f"({differs_text(planned.variant.own)}) · index {planned.index} · spent so far ${spent:.4f}")
            planned.config.budget.max_cost_usd = remaining_budget(plan, spent)
            run = runs[planned.variant.name] = build_variant_index(planned, plan, console)
            if run.shared_from:
                console.print(f"  started from the finished stages of index {run.shared_from}", highlight=False)
            spent += run.cost_usd
            if plan.questions:
                planned.config.budget.max_cost_usd = remaining_budget(plan, spent)
                results, run.evaluation_reused = asyncio.run(evaluate_variant(planned, plan, answer))
                evaluations[planned.variant.name] = results
                spent += 0.0 if run.evaluation_reused else sum(r.cost_usd for r in results)
                console.print(f"  evaluated on {len(plan.questions)} questions"
                              f"{' (unchanged, reused)' if run.evaluation_reused else ''}", highlight=False)
        judged = asyncio.run(judge_variants(plan, evaluations)) if plan.spec.judge and answer else {}
    except BudgetExceeded:
        _write_results(plan, runs, evaluations, {})
        raise
    table = _write_results(plan, runs, evaluations, judged)
    console.print(f"spent ${spent:.4f} in this run; results in {plan.output}", highlight=False)
    return table


async def judge_variants(plan: ExperimentPlan, evaluations: dict[str, list[QuestionResult]]
                         ) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every variant's answers against the baseline's, per judged method and question, in both orders;
    written to judgments.jsonl. Returns {variant: {method: judgments}}."""
    from graphrag_lite.llm.gateway import Gateway

    judge = plan.spec.judge
    assert judge is not None
    baseline = next(p for p in plan.variants if p.variant.name == judge.baseline)
    answers = {(name, r.method, r.question_id): r.answer for name, rs in evaluations.items() for r in rs if r.answer}
    texts = {q.id: q.question for q in plan.questions}
    gateway = Gateway(baseline.config)
    judged: dict[str, dict[str, list[dict[str, Any]]]] = {}
    try:
        for planned in [p for p in plan.variants if p is not baseline]:
            name = planned.variant.name
            for method in judge.methods:
                for question_id, question in texts.items():
                    ours, theirs = answers.get((name, method, question_id)), answers.get((judge.baseline, method,
                                                                                          question_id))
                    if ours is None or theirs is None:
                        continue
                    pair = await judge_pair(gateway, judge.model_id, question, (ours, theirs), judge.criteria,
                                            judge.prompt, (question_id, method, name, judge.baseline))
                    judged.setdefault(name, {}).setdefault(method, []).extend(asdict(j) for j in pair)
    finally:
        gateway.close()
    lines = [json.dumps(j, ensure_ascii=False) for methods in judged.values() for js in methods.values() for j in js]
    (plan.output / "judgments.jsonl").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return judged


def _write_results(plan: ExperimentPlan, runs: dict[str, Any], evaluations: dict[str, list[QuestionResult]],
                   judged: dict[str, dict[str, list[dict[str, Any]]]]) -> pd.DataFrame:
    rows = [row for planned in plan.variants if planned.variant.name in runs
            for row in _rows(planned, runs[planned.variant.name], evaluations, judged, plan)]
    table = ordered(pd.DataFrame(rows))
    table.to_parquet(plan.output / RESULTS, index=False)
    table.to_csv(plan.output / "results.csv", index=False)
    table.attrs["report"] = str(write_report(plan, table))
    return table


def _rows(planned: PlannedVariant, run: VariantRun, evaluations: dict[str, list[QuestionResult]],
          judged: dict[str, dict[str, list[dict[str, Any]]]], plan: ExperimentPlan) -> list[dict[str, Any]]:
    name = planned.variant.name
    criteria = plan.spec.judge.criteria if plan.spec.judge else []
    return variant_rows(name, planned.index, differs_text(planned.variant.own), len(run.stages_run),
                        planned.config.output.base_dir, evaluations.get(name, []), judged.get(name, {}), criteria)
