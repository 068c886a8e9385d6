"""Benchmark (issue 38): how an index grows with its corpus, from 1,000 to 100,000 documents.

    .venv/bin/python bench/scale.py --sizes 1000,10000,100000 [--standard --standard-sizes 1000,10000,30000]
                                    [--work DIR] [--seed 1] [--max-names N] [--json PATH] [--keep]

The corpus is bench/scale_corpus.py's: N synthetic documents of 200 to 4,000 words whose distinct names grow
with N as real corpora's do (a power of N, Zipf-like frequencies, topics of co-occurring names), written once
per (N, seed) and version of the generator under --work (default: a temporary folder, gone at the end) and read
again by later runs.
With --max-names N, no new name is made past N (a name drawn among those made instead): the text grows with
the corpus while its graph stops growing, which shows what memory the text alone costs.
For each size, a fresh project (`graphrag-lite init`, with input.base_dir set to the corpus's folder) is
indexed by `graphrag-lite index --method fast` in a subprocess, one size after another; with --standard, the
standard method too (--standard-sizes), with the offline fake model (fake/default, fake/embedding) at zero
latency and no answer cache (a fresh project has none), so what it measures is the pipeline's own work.
What is measured, per run:
- per stage, from the run's stats.json: wall time, peak RSS (peak_rss_mb: the stage's high-water mark; the
  runner resets it before each stage, so it includes what earlier stages left allocated), the resident size
  at its start where stats.json gives it (start_rss_mb: what earlier stages left; "-" before it did) and rows
  in and out;
- the whole run: the process's wall time (start to exit, start-up included) and CPU time (user + system: on a
  shared machine the wall may include waiting for a core), and its peak RSS: the larger of the stages' and of
  the process's high-water mark read every 20 ms while it runs (bench/large_input.py's sampler: it also sees
  the writing of a stage's tables, which comes after the stage's own peak);
- per document: wall ms and KB of peak RSS.
It prints a table per run, then per method a summary across sizes with growth ratios against the smallest
size (per-document wall, peak RSS, and the peak's growth per added document) and each stage's wall and peak
at every size. --json writes every figure. --keep keeps each project (its index) under --work.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from large_input import run_sampled
from scale_corpus import cached_corpus

FAKE_MODELS = ("models.default_chat_model.model=fake/default",
               "models.default_embedding_model.model=fake/embedding")
TABLES = ("documents", "text_units", "entities", "relationships", "communities", "community_reports")


def sizes(text: str) -> list[int]:
    return sorted({int(size.replace("_", "")) for size in text.split(",") if size.strip()})


def corpus(work: Path, count: int, seed: int, max_names: int | None = None) -> tuple[Path, dict]:
    """The corpus's folder and figures, generated when --work does not hold it yet."""
    started = time.perf_counter()
    folder, figures, generated = cached_corpus(work, count, seed, max_names)
    took = time.perf_counter() - started
    print(f"\ncorpus of {count:,} documents (seed {seed}): {figures['words']:,} words, {figures['topics']:,} "
          f"topics, {figures['distinct_names']:,} distinct names ({figures['names_in_2_documents_or_more']:,} in 2 "
          f"documents or more; the most frequent in {figures['most_documents_of_a_name']:,}); "
          + (f"generated in {took:.1f} s" if generated else "cached"))
    return folder, figures


def index(root: Path, documents: Path, method: str) -> dict:
    """One `index` run of a fresh project over `documents`: exit code, wall, CPU, sampled peak and stats."""
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "graphrag_lite", "init", "--root", str(root)], check=True,
                   capture_output=True)
    settings = [f"input.base_dir={documents.resolve()}", *(FAKE_MODELS if method == "standard" else ())]
    command = [sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--method", method, "--quiet"]
    for setting in settings:
        command += ["--set", setting]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    returncode, wall, peak_mb, output = run_sampled(command)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    stats_file = root / "output" / "stats.json"
    stats = json.loads(stats_file.read_text(encoding="utf-8")) if stats_file.is_file() else {}
    return {"exit": returncode, "wall_s": wall, "cpu_s": cpu, "sampled_peak_mb": peak_mb,
            "stats": stats, "output_tail": output.strip().splitlines()[-5:]}


def figures(method: str, count: int, corpus_figures: dict, run: dict) -> dict:
    """What a run measured, per stage and in all."""
    stages = {name: {key: stage.get(key) for key in ("wall_s", "start_rss_mb", "peak_rss_mb", "rows_in", "rows_out",
                                                     "summary", "details")}
              for name, stage in run["stats"].get("stages", {}).items()}
    stage_peak = max((stage["peak_rss_mb"] or 0 for stage in stages.values()), default=0.0)
    peak = max(stage_peak, run["sampled_peak_mb"])
    rows = {table: n for stage in stages.values() for table, n in (stage["rows_out"] or {}).items()}
    llm = run["stats"].get("llm") or {}
    return {"method": method, "documents": count, "corpus": corpus_figures, "exit": run["exit"],
            "status": run["stats"].get("status", "no stats.json"),
            "wall_s": run["wall_s"], "run_wall_s": run["stats"].get("wall_s"), "cpu_s": run["cpu_s"],
            "peak_mb": peak, "stages_peak_mb": stage_peak, "sampled_peak_mb": run["sampled_peak_mb"],
            "wall_ms_per_document": run["wall_s"] * 1000 / count, "peak_kb_per_document": peak * 1024 / count,
            "tables": {table: rows[table] for table in TABLES if table in rows},
            "llm_calls": llm.get("calls", 0), "stages": stages, "output_tail": run["output_tail"]}


def rows(counts: dict | None) -> str:
    return ", ".join(f"{table} {n:,}" for table, n in (counts or {}).items()) or "-"


def print_run(result: dict) -> None:
    print(f"{result['method']} method, {result['documents']:,} documents: exit {result['exit']} ({result['status']})")
    if result["exit"] != 0:
        print("  " + "\n  ".join(result["output_tail"]))
    print(f"  {'stage':30}{'wall s':>8}{'start MB':>9}{'peak MB':>9}  rows in -> out")
    for name, stage in result["stages"].items():
        start = "-" if stage["start_rss_mb"] is None else f"{stage['start_rss_mb']:,.0f}"
        print(f"  {name:30}{stage['wall_s'] or 0:8.1f}{start:>9}{stage['peak_rss_mb'] or 0:9,.0f}  "
              f"{rows(stage['rows_in'])} -> {rows(stage['rows_out'])}")
    calls = f", {result['llm_calls']:,} model calls" if result["llm_calls"] else ""
    print(f"  run: {result['wall_s']:.1f} s wall ({result['cpu_s']:.1f} s CPU{calls}), peak RSS "
          f"{result['peak_mb']:,.0f} MB (stages' {result['stages_peak_mb']:,.0f}, sampled "
          f"{result['sampled_peak_mb']:,.0f})")
    print(f"  per document: {result['wall_ms_per_document']:.1f} ms wall, {result['peak_kb_per_document']:,.0f} KB "
          f"of peak RSS; index: {rows(result['tables'])}")


def print_summary(results: list[dict]) -> None:
    """Per method: the sizes side by side, with growth against the smallest."""
    for method in dict.fromkeys(r["method"] for r in results):
        # a run that finished with failures (exit 4: the fake model cuts off a few of its longest answers,
        # as a real one would) wrote every table: it counts, marked
        runs = [r for r in results if r["method"] == method and r["exit"] in (0, 4)]
        if not runs:
            continue
        first = runs[0]
        print(f"\n{method} method, growth against {first['documents']:,} documents (x: ratio to it; marginal: "
              "KB of peak RSS added per added document; names: the corpus's distinct names; calls: model calls)")
        print(f"{'documents':>10}{'wall s':>9}{'CPU s':>9}{'ms/doc':>8}{'x':>6}{'peak MB':>9}{'x':>6}{'KB/doc':>8}"
              f"{'marginal':>9}{'text units':>11}{'names':>9}{'entities':>9}{'relations':>10}{'communities':>12}"
              f"{'calls':>9}")
        for run in runs:
            added = run["documents"] - first["documents"]
            marginal = f"{(run['peak_mb'] - first['peak_mb']) * 1024 / added:9.1f}" if added else f"{'':9}"
            tables = run["tables"]
            mark = "*" if run["exit"] else " "
            print(f"{mark}{run['documents']:>9,}{run['wall_s']:9.1f}{run['cpu_s']:9.1f}{run['wall_ms_per_document']:8.1f}"
                  f"{run['wall_ms_per_document'] / first['wall_ms_per_document']:6.2f}{run['peak_mb']:9,.0f}"
                  f"{run['peak_mb'] / first['peak_mb']:6.2f}{run['peak_kb_per_document']:8.0f}{marginal}"
                  f"{tables.get('text_units', 0):11,}{run['corpus']['distinct_names']:9,}"
                  f"{tables.get('entities', 0):9,}{tables.get('relationships', 0):10,}"
                  f"{tables.get('communities', 0):12,}{run['llm_calls']:9,}")
        if any(run["exit"] for run in runs):
            print("* finished with failures (exit 4): some items failed, every table written")
        print_stage_growth(runs)


def print_stage_growth(runs: list[dict]) -> None:
    """Each stage's wall and peak at every size, and its per-document wall at the largest over the smallest."""
    labels = [f"{run['documents'] / 1000:g}k" for run in runs]
    print(f"\n{'stage':30}" + "".join(f"{'wall s ' + label:>14}" for label in labels) + f"{'x ms/doc':>10}"
          + "".join(f"{'peak MB ' + label:>15}" for label in labels))
    first, last = runs[0], runs[-1]
    for name in first["stages"]:
        walls = [run["stages"].get(name, {}).get("wall_s") or 0.0 for run in runs]
        peaks = [run["stages"].get(name, {}).get("peak_rss_mb") or 0.0 for run in runs]
        ratio = (walls[-1] / last["documents"]) / (walls[0] / first["documents"]) if walls[0] else 0.0
        print(f"{name:30}" + "".join(f"{wall:14.1f}" for wall in walls) + f"{ratio:10.2f}"
              + "".join(f"{peak:15,.0f}" for peak in peaks))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=sizes, default=[1000, 10000, 100000], help="documents, fast method (\"\": "
                        "none, with --standard)")
    parser.add_argument("--standard", action="store_true", help="also the standard method (fake model)")
    parser.add_argument("--standard-sizes", type=sizes, default=[1000, 10000, 30000], help="documents, standard")
    parser.add_argument("--work", type=Path, help="folder of the cached corpora and the projects (default: a "
                        "temporary one)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-names", type=int, help="stop making new names past this many: a corpus whose graph "
                        "stays small while its text grows")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--keep", action="store_true", help="keep each project (its index) under --work")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = (args.work or Path(scratch)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        plan = [("fast", n) for n in args.sizes] + [("standard", n) for n in args.standard_sizes if args.standard]
        results = []
        for method, count in plan:  # one at a time: a run's memory and cores are its own
            documents, corpus_figures = corpus(work, count, args.seed, args.max_names)
            capped = "" if args.max_names is None else f"-names{args.max_names}"
            root = work / f"{method}-n{count}-seed{args.seed}{capped}"
            results.append(figures(method, count, corpus_figures, index(root, documents, method)))
            print_run(results[-1])
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        print_summary(results)
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, "runs": results}, indent=1), encoding="utf-8")
        print(f"\nfigures written to {args.json}")


if __name__ == "__main__":
    main()
