"""Benchmark (issue 16): how close a standard index comes to the wall time its own model calls allow.

    .venv/bin/python bench/latency_bound.py [--documents 100] [--latency 0.5] [--concurrency 25]

The documents are the first Wikipedia paragraphs of ../shared/corpora/hotpotqa-100/corpus.json, one file
each. The standard pipeline indexes them from scratch (no answer cache) through the fake provider answering
every call after a fixed `--latency`, with `--concurrency` calls in flight per model, one gleaning, claims
off (the set-up of issue 16). The bound is what latency and concurrency allow for the calls the run actually
made: per stage, ceil(calls / concurrency) rounds of `latency` seconds, but never fewer rounds than the
calls that must follow each other (a text unit's first answer, then its gleaning; one round per community
level for reports, written deepest level first), summed along the stages, which
run one after another. It prints per stage: calls, prompt and completion tokens, wall time and bound, and
the whole run's wall / bound (issue 16's target: at most 1.2).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shared_data import shared_path

SETTINGS = """models:
  default_chat_model:
    model: fake/default?latency={latency}
    concurrency: {concurrency}
  default_embedding_model:
    model: fake/embedding?latency={latency}
    concurrency: {concurrency}
extract_graph:
  max_gleanings: 1
extract_claims:
  enabled: false
"""
# calls of one text unit that wait for each other with one gleaning: the answer, then the gleaning (the
# yes/no check runs only between gleanings)
CHAINED_EXTRACTION = 2


def write_corpus(folder: Path, count: int) -> None:
    corpus = json.loads(shared_path("corpora/hotpotqa-100/corpus.json").read_text(encoding="utf-8"))
    for number, (title, sentences) in enumerate(list(corpus.items())[:count]):
        name = "".join(c if c.isalnum() else "-" for c in title)[:60]
        (folder / f"{number:04d}-{name}.txt").write_text(f"{title}\n\n{' '.join(sentences)}\n", encoding="utf-8")


def rounds(name: str, stage: dict, sent: int, concurrency: int, levels: int) -> int:
    """The fewest rounds of calls a stage needs: by concurrency, and by the calls that must wait for others
    (`levels`: community levels, whose reports are written one level after the other)."""
    if sent == 0:
        return 0
    if name.startswith("community_reports"):
        chained = levels
    else:
        chained = CHAINED_EXTRACTION if stage.get("details", {}).get("calls_per_unit", 1) > 1 else 1
    return max(math.ceil(sent / concurrency), chained)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "input").mkdir()
        (root / "settings.yaml").write_text(SETTINGS.format(latency=args.latency, concurrency=args.concurrency),
                                            encoding="utf-8")
        write_corpus(root / "input", args.documents)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--quiet"],
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"index failed ({done.returncode}): {done.stderr[-2000:]}")
        stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
    report(stats, wall, args)


def report(stats: dict, wall: float, args: argparse.Namespace) -> None:
    print(f"standard index of {args.documents} HotpotQA paragraphs, fake provider at {args.latency} s a call, "
          f"concurrency {args.concurrency}, one gleaning, claims off, no cache")
    print(f"{'stage':24}{'calls':>8}{'prompt tok':>12}{'compl. tok':>12}{'wall s':>9}{'bound s':>9}")
    total_bound = 0.0
    levels = len(stats["stages"].get("cluster_graph", {}).get("details", {}).get("communities_per_level", {})) or 1
    for name, stage in stats["stages"].items():
        llm = stage.get("llm") or {}
        sent = llm.get("calls", 0) - llm.get("cache_hits", 0)
        bound = rounds(name, stage, sent, args.concurrency, levels) * args.latency
        total_bound += bound
        print(f"{name:24}{sent:>8,}{llm.get('prompt_tokens', 0):>12,}{llm.get('completion_tokens', 0):>12,}"
              f"{stage.get('wall_s', 0.0):>9.1f}{bound:>9.1f}")
    llm = stats.get("llm") or {}
    print(f"{'all':24}{llm.get('calls', 0) - llm.get('cache_hits', 0):>8,}{llm.get('prompt_tokens', 0):>12,}"
          f"{llm.get('completion_tokens', 0):>12,}{stats.get('wall_s', 0.0):>9.1f}{total_bound:>9.1f}")
    ratio = f"{stats.get('wall_s', 0.0) / total_bound:.2f}" if total_bound else "n/a (no latency)"
    calls = llm.get("calls", 0) - llm.get("cache_hits", 0)
    print(f"wall / bound: {ratio} (issue 16's target: at most 1.2); the process took {wall:.1f} s in all "
          f"(start-up included); {stats.get('wall_s', 0.0) / max(calls, 1) * 1000:.1f} ms of run time per call")


if __name__ == "__main__":
    main()
