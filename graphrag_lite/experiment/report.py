"""report.md: the results table, the settings each variant changes, and plots (matplotlib, the
`experiment` extra): quality against cost, and each method's recall by variant."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from graphrag_lite.evaluation.evaluate import PACKED
from graphrag_lite.experiment.spec import flatten

if TYPE_CHECKING:
    from graphrag_lite.experiment.runner import ExperimentPlan

SHOWN = ["variant", "method", "group", "index_status", "questions", "all_gold", "recall", "exact_match", "token_f1",
         "contains", "win_overall", "query_calls", "query_cost_usd", "index_calls", "index_cost_usd", "index_wall_s",
         "entities", "relationships", "communities", "modularity", "integrity_problems", "stages_run"]
# The terminal is narrower than a report: scores per variant and method, then indexes per variant, with
# short headers; a cost or count column that is zero everywhere is left out.
TERMINAL_RETRIEVAL = ["variant", "method", "group", "all_gold", "recall"]
TERMINAL_ANSWERS = ["variant", "method", "group", "exact_match", "token_f1", "contains", "win_overall",
                    "judge_failures"]
TERMINAL_QUERIES = ["variant", "method", "group", "query_calls", "query_cost_usd", "query_median_s", "query_failures",
                    "failures", "calls", "cost_usd", "median_s"]
TERMINAL_INDEXES = ["variant", "index_status", "index_calls", "index_cost_usd", "index_wall_s", "entities",
                    "relationships", "communities", "modularity", "integrity_problems", "stages_run"]
HEADERS = {"all_gold": "all-gold", "exact_match": "EM", "token_f1": "F1", "win_overall": "win", "query_calls": "calls",
           "query_cost_usd": "cost $", "query_median_s": "median s", "index_calls": "calls", "index_cost_usd": "cost $",
           "index_wall_s": "time s", "relationships": "rels", "communities": "comms", "modularity": "modul.",
           "integrity_problems": "problems", "stages_run": "ran", "index_status": "status",
           "query_failures": "failed", "cost_usd": "cost $", "median_s": "median s"}
OPTIONAL = ("query_calls", "query_cost_usd", "index_calls", "index_cost_usd", "integrity_problems", "query_failures",
            "failures", "calls", "cost_usd", "judge_failures")


def terminal_tables(table: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) pairs for the terminal: the scores, and one row per index figure set."""
    tables = []
    parts = [("retrieval", TERMINAL_RETRIEVAL, table), ("answers", TERMINAL_ANSWERS, table),
             ("query costs", TERMINAL_QUERIES, table)]
    if "variant" in table:
        parts.append(("indexes", TERMINAL_INDEXES, table.drop_duplicates("variant")))
    for title, wanted, rows in parts:
        columns = [c for c in shown_columns(rows, wanted) if (c not in OPTIONAL or (rows[c].fillna(1) != 0).any())
                   and (c != "index_status" or (rows[c] != "completed").any())]
        if any(c not in ("variant", "method", "group") for c in columns):
            tables.append((title, rows[columns].rename(columns=HEADERS)))
    return tables
QUALITY = ("recall", "token_f1", "contains", "win_overall")  # the first one measured is plotted


def shown_columns(table: pd.DataFrame, wanted: list[str] = SHOWN) -> list[str]:
    """The columns worth a glance: the wanted ones that have a value somewhere."""
    return [c for c in wanted if c in table and table[c].notna().any()]


def markdown_table(table: pd.DataFrame, columns: list[str] | None = None) -> str:
    columns = columns or shown_columns(table)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(format_value(row[c]) for c in columns) + " |" for _, row in table.iterrows()]
    return "\n".join(lines)


def format_value(value: Any) -> str:
    """A cell: small values (costs of a cent or less) to two significant digits in plain decimals, never in
    scientific notation (0.000007 beside 0.0023, not 7e-06)."""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if abs(value) < 0.01 and value:
            rounded = float(f"{value:.2g}")
            return f"{rounded:.{1 - math.floor(math.log10(abs(rounded)))}f}".rstrip("0").rstrip(".")
        return f"{value:.3f}"
    return str(value)


def yaml_text(value: Any) -> str:
    """A setting's value as it is written in YAML (null, true, [1, 2])."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def write_report(plan: ExperimentPlan, table: pd.DataFrame, groups: pd.DataFrame | None = None) -> Path:
    packed = " (+ basic search packed to local search's budget, the fair baseline)" \
        if "method" in table and PACKED in set(table["method"]) else ""
    lines = [f"# Experiment {plan.path.name}", "", f"Project: `{plan.spec.project}`. "
             f"{len(plan.variants)} variants, {len(plan.questions)} questions, methods: "
             f"{', '.join(plan.spec.methods)}{packed}.",
             "", "## Results", "", markdown_table(table), "",
             "all_gold: share of questions with every gold item in the context; recall: mean share of gold items "
             "found. index_* figures are what building the index costs from scratch (cached answers counted at "
             "the price first paid); a cost is empty when a model is not in LiteLLM's price map; index_wall_s is "
             "the stages' own time (the first index built in a process also pays about 1 s of LanceDB start-up). "
             "stages_run: stages that ran in this invocation. Full table: results.csv / results.parquet.", "",
             "## What each variant sets", ""]
    lines += [f"- **{p.variant.name}** (index `{p.index}`): " + (", ".join(f"`{k}={yaml_text(v)}`" for k, v in
                                                                      p.variant.own.items()) or "the base settings")
              for p in plan.variants]
    if plan.spec.base:
        lines += ["", "Every variant also sets: " + ", ".join(f"`{k}={yaml_text(v)}`" for k, v in
                                                             flatten(plan.spec.base, plan.path, "base").items())]
    if groups is not None and len(groups):
        lines += ["", "## All-gold by question group", "", markdown_table(groups, list(groups.columns))]
    if "global" in plan.spec.methods:
        lines += ["", "Global search has no evidence recall (its context is community reports, not text units); "
                  "it is scored on answers only (`answers: true`)."]
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
    """Quality against cost, a marker per method; points are numbered by variant (the key is beside the
    plot) and points that coincide share one label, so nothing is written over anything else."""
    costs = table["index_cost_usd"] + table.get("query_cost_usd", 0.0)
    x, label = (costs, "cost, USD (index from scratch + queries)") if costs.notna().all() and costs.max() > 0 else \
        (table["index_wall_s"], "indexing time, s (model cost zero or unknown)")
    numbers = {name: i for i, name in enumerate(dict.fromkeys(table["variant"]), start=1)}
    figure, axes = plt.subplots(figsize=(8.5, 4.5))
    labels: dict[tuple[float, float], list[str]] = {}
    for (method, part), marker, size in zip(table[table[quality].notna()].groupby("method", sort=False), "os^Dv<>",
                                            (90, 55, 30, 20, 15, 12, 10), strict=False):
        # later methods are drawn smaller, so a point under another stays visible
        axes.scatter(x[part.index], part[quality], label=method, marker=marker, s=size, alpha=0.75)
        for px, py, name in zip(x[part.index], part[quality], part["variant"], strict=True):
            labels.setdefault((round(float(px), 6), float(py)), []).append(str(numbers[name]))
    _annotate(axes, labels, x, table[quality])
    axes.set_xlabel(label)
    axes.set_ylabel(quality)
    axes.set_title(f"{quality} against cost")
    axes.legend(fontsize=8, loc="best")
    axes.margins(x=0.12, y=0.12)
    key = "\n".join(f"{n}: {name}" for name, n in numbers.items())
    figure.text(0.74, 0.5, key, fontsize=7, va="center", ha="left", family="monospace")
    figure.tight_layout(rect=(0, 0, 0.72, 1))
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return target


def _annotate(axes: Any, labels: dict[tuple[float, float], list[str]], x: pd.Series, y: pd.Series) -> None:
    """Each label beside its point, moved to another side when an earlier label is close (within 5% of the
    axes' ranges), so labels of neighbouring points do not print over each other."""
    spans = (float(x.max() - x.min()) or 1.0, float(y.max() - y.min()) or 1.0)
    offsets = ((5, 5), (5, -11), (-12, 5), (-12, -11), (5, 15), (-12, 15))
    placed: list[tuple[float, float, int]] = []
    for (px, py), names in sorted(labels.items()):
        near = {k for qx, qy, k in placed if abs(qx - px) / spans[0] < 0.05 and abs(qy - py) / spans[1] < 0.05}
        slot = next((k for k in range(len(offsets)) if k not in near), 0)
        placed.append((px, py, slot))
        axes.annotate(",".join(dict.fromkeys(names)), (px, py), fontsize=7, textcoords="offset points",
                      xytext=offsets[slot])


def _recall_plot(plt: Any, table: pd.DataFrame, target: Path) -> Path:
    scored = table[table["recall"].notna()]
    wide = scored.pivot_table(index="variant", columns="method", values="recall", sort=False)
    figure, axes = plt.subplots(figsize=(max(6, 1.2 * len(wide)), 4.5))
    wide.plot.bar(ax=axes, rot=25)
    plt.setp(axes.get_xticklabels(), ha="right", rotation_mode="anchor")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    axes.set_ylabel("evidence recall")
    axes.set_ylim(0, 1)
    axes.set_title("Recall of gold evidence by variant and method")
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return target
