"""The experiment's results: one row per variant and query method, with what the index cost and what it
is (from stats.json and its tables), and how the method scored on the questions."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from graphrag_lite.evaluation.evaluate import QuestionResult, summary_table
from graphrag_lite.evaluation.index_quality import index_figures
from graphrag_lite.evaluation.judge import win_rates
from graphrag_lite.pipeline.records import STATS_FILE
from graphrag_lite.storage import read_json


def index_costs(stats: dict[str, Any]) -> dict[str, Any]:
    """What building the index costs from scratch: every stage's calls, tokens and cost as if no answer
    came from the cache (the cache makes a re-run free, not the method cheap), and the stages' own time."""
    stages = stats.get("stages", {}).values()
    llm = [s["llm"] for s in stages if s.get("llm")]
    return {"index_calls": sum(x["calls"] for x in llm),
            "index_tokens": sum(x.get("tokens_without_cache", x["prompt_tokens"] + x["completion_tokens"])
                                for x in llm),
            "index_cost_usd": math.nan if any(x.get("cost_usd_without_cache", 0) is None for x in llm) else
            round(sum(x.get("cost_usd_without_cache", x["cost_usd"]) for x in llm), 6),
            "index_wall_s": round(sum(s.get("wall_s", 0.0) for s in stages), 2),
            "stage_problems": sum(len(s.get("problems", [])) for s in stages)}


def index_row(index: str, output_dir: Any) -> dict[str, Any]:
    """An index's columns: what building it costs, its status and its figures (read once per index)."""
    stats = read_json(output_dir / STATS_FILE)
    figures = {k: v for k, v in index_figures(output_dir).items() if k != "integrity_examples"}
    return {"index": index, "pipeline": stats.get("pipeline", ""), "index_status": stats.get("status", ""),
            **index_costs(stats), **figures}


def variant_rows(name: str, differs: str, stages_run: int, index: dict[str, Any], results: list[QuestionResult],
                 judged: dict[str, list[dict[str, Any]]], criteria: list[str]) -> list[dict[str, Any]]:
    """The variant's rows: its index's columns, repeated on the row of every method it was queried with."""
    common = {"variant": name, "differs": differs, "stages_run": stages_run, **index}
    if not results:
        return [{**common, "method": ""}]
    rows = []
    for summary in summary_table(results).to_dict("records"):
        method = summary.pop("method")
        scores = {f"query_{k}" if k in ("calls", "tokens", "cost_usd", "seconds", "median_s", "failures") else str(k): v
                  for k, v in summary.items()}
        row: dict[str, Any] = {**common, "method": method, **scores}
        if method in judged:
            verdicts = [j for j in judged[method] if "points" in j]
            row.update({f"win_{k}": v for k, v in win_rates(verdicts, criteria).items()})
            row["judge_failures"] = len(judged[method]) - len(verdicts)
            row["judge_calls"] = len(verdicts)
            costs = [j.get("cost_usd") for j in verdicts]
            row["judge_cost_usd"] = math.nan if None in costs else round(sum(c or 0.0 for c in costs), 6)
        rows.append(row)
    return rows


def ordered(table: pd.DataFrame) -> pd.DataFrame:
    """Columns in reading order: who, quality, cost, graph figures."""
    first = ["variant", "method", "differs", "questions", "all_gold", "recall", "exact_match", "token_f1",
             "contains"]
    wins = sorted(str(c) for c in table.columns if str(c).startswith("win_"))
    costs = ["query_calls", "query_tokens", "query_cost_usd", "query_median_s", "index_calls", "index_tokens",
             "index_cost_usd", "index_wall_s", "stages_run"]
    columns = [c for c in [*first, *wins, *costs] if c in table]
    return table[columns + [c for c in table if c not in columns]]


def differs_text(own: dict[str, Any]) -> str:
    return "; ".join(f"{k}={v}" for k, v in own.items()) or "(base)"
