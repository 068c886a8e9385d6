"""report.md: the results table, the settings each variant changes, and plots (matplotlib, the
`experiment` extra): quality against cost, and each method's recall by variant."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from graphrag_lite.evaluation.evaluate import PACKED

if TYPE_CHECKING:
    from graphrag_lite.experiment.runner import ExperimentPlan

SHOWN = ["variant", "method", "group", "questions", "all_gold", "recall", "exact_match", "token_f1", "contains",
         "win_overall", "query_calls", "query_cost_usd", "index_calls", "index_cost_usd", "index_wall_s", "entities",
         "relationships", "communities", "modularity", "integrity_problems", "stages_run"]
# the terminal is narrower than a report: what tells the variants apart first
TERMINAL = ["variant", "method", "group", "questions", "all_gold", "recall", "exact_match", "token_f1", "contains",
            "win_overall", "query_calls", "query_cost_usd", "index_cost_usd", "index_wall_s", "entities",
            "communities", "modularity", "stages_run"]
QUALITY = ("recall", "token_f1", "contains", "win_overall")  # the first one measured is plotted


def shown_columns(table: pd.DataFrame, wanted: list[str] = SHOWN) -> list[str]:
    """The columns worth a glance: the wanted ones that have a value somewhere."""
    return [c for c in wanted if c in table and table[c].notna().any()]


def markdown_table(table: pd.DataFrame) -> str:
    columns = shown_columns(table)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(format_value(row[c]) for c in columns) + " |" for _, row in table.iterrows()]
    return "\n".join(lines)


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4f}" if abs(value) < 0.01 and value else f"{value:.3f}"
    return str(value)


def write_report(plan: ExperimentPlan, table: pd.DataFrame) -> Path:
    packed = " (+ basic search packed to local search's budget, the fair baseline)" \
        if "method" in table and PACKED in set(table["method"]) else ""
    lines = [f"# Experiment {plan.path.name}", "", f"Project: `{plan.spec.project}`. "
             f"{len(plan.variants)} variants, {len(plan.questions)} questions, methods: "
             f"{', '.join(plan.spec.methods)}{packed}.",
             "", "## Results", "", markdown_table(table), "",
             "all_gold: share of questions with every gold item in the context; recall: mean share of gold items "
             "found. index_* figures are what building the index costs from scratch (cached answers counted at "
             "the price first paid); a cost is empty when a model is not in LiteLLM's price map. Full table: "
             "results.csv / results.parquet.", "", "## What each variant sets", ""]
    lines += [f"- **{p.variant.name}** (index `{p.index}`): " + (", ".join(f"`{k}={v}`" for k, v in
                                                                      p.variant.own.items()) or "the base settings")
              for p in plan.variants]
    if plan.spec.base:
        lines += ["", "Every variant also sets: " + ", ".join(f"`{k}={v}`" for k, v in plan.spec.base.items())]
    lines += ["", "## Plots", "", *write_plots(table, plan.output)]
    target = plan.output / "report.md"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def write_plots(table: pd.DataFrame, folder: Path) -> list[str]:
    """The plots as Markdown image lines (or a line saying why there are none)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["(no plots: matplotlib is not installed; `pip install 'graphrag-lite[experiment]'`)"]
    quality = next((c for c in QUALITY if c in table and table[c].notna().any()), None)
    if quality is None:
        return ["(no plots: no question was scored)"]
    written = [_cost_plot(plt, table, quality, folder / "quality_vs_cost.png")]
    if "recall" in table and table["recall"].notna().any():
        written.append(_recall_plot(plt, table, folder / "recall_by_variant.png"))
    return [f"![{p.stem}]({p.name})" for p in written]


def _cost_plot(plt: Any, table: pd.DataFrame, quality: str, target: Path) -> Path:
    costs = table["index_cost_usd"].fillna(0)
    if "query_cost_usd" in table:
        costs = costs + table["query_cost_usd"].fillna(0)
    x, label = (costs, "cost, USD (index from scratch + queries)") if costs.max() > 0 else \
        (table["index_wall_s"], "indexing time, s (no model cost)")
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for method, part in table[table[quality].notna()].groupby("method", sort=False):
        axes.scatter(x[part.index], part[quality], label=method)
        for i in part.index:
            axes.annotate(str(table.at[i, "variant"]), (x[i], part.at[i, quality]), fontsize=7,
                          textcoords="offset points", xytext=(3, 3))
    axes.set_xlabel(label)
    axes.set_ylabel(quality)
    axes.set_title(f"{quality} against cost, by variant and method")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return target


def _recall_plot(plt: Any, table: pd.DataFrame, target: Path) -> Path:
    scored = table[table["recall"].notna()]
    wide = scored.pivot_table(index="variant", columns="method", values="recall", sort=False)
    figure, axes = plt.subplots(figsize=(max(6, 1.2 * len(wide)), 4.5))
    wide.plot.bar(ax=axes, rot=20)
    axes.set_ylabel("evidence recall")
    axes.set_ylim(0, 1)
    axes.set_title("Recall of gold evidence by variant and method")
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return target
