"""Benchmark: a standard index of 150 documents through the fake provider with 20% provider faults and 5%
malformed replies, against a clean run of the same documents.

    .venv/bin/python bench/fault_tolerance.py [--documents 150] [--seed 1]

The 150 documents are the first podcast transcript chunks of ../shared/corpora (each ~600 tokens). Faults:
5% 429 (with Retry-After), 5% 500, 5% time-outs, 5% dropped connections, and 5% of the answers cut to a
third without their end (a server that sends broken replies). Prints both runs' exit codes, calls and
retries, whether every GraphRAG table is identical (ids and values), what check_index.py --compare says,
and whether a forced rebuild of the faulty index makes 0 calls (every cached answer passes its parser again).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pandas as pd
from shared_data import SHARED

ZIP = SHARED / "corpora/podcast-transcripts/kevin-scott-podcasts.zip"
TABLES = ("documents", "text_units", "entities", "relationships", "communities", "community_reports", "covariates")
FAULTS = "rate_limit=0.05&server_error=0.05&timeout=0.05&drop=0.05&malformed=0.05"
SETTINGS = """models:
  default_chat_model:
    model: {chat}
    max_retry_wait: 0.05
    timeout: 2
    max_retries: 30
  default_embedding_model:
    model: fake/embedding
"""


def build(root: Path, chat: str, documents: list[tuple[str, bytes]], *args: str) -> tuple[int, float, dict]:
    (root / "input").mkdir(parents=True, exist_ok=True)
    for name, data in documents:
        (root / "input" / name).write_bytes(data)
    (root / "settings.yaml").write_text(SETTINGS.format(chat=chat))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), *args],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stats = json.loads((root / "output" / "stats.json").read_text())
    return done.returncode, time.perf_counter() - started, stats


def same_tables(a: Path, b: Path) -> list[str]:
    differing = []
    for name in TABLES:
        left, right = (pd.read_parquet(p / "output" / f"{name}.parquet").drop(columns=["creation_date"],
                                                                             errors="ignore") for p in (a, b))
        if not left.equals(right):
            differing.append(name)
    return differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    archive = zipfile.ZipFile(ZIP)
    names = sorted(n for n in archive.namelist() if n.endswith(".txt"))[: args.documents]
    documents = [(Path(n).name, archive.read(n)) for n in names]
    with tempfile.TemporaryDirectory() as folder:
        clean, faulty = Path(folder) / "clean", Path(folder) / "faulty"
        code, wall, stats = build(clean, "fake/default", documents)
        print(f"clean:  exit {code}, {wall:.1f} s, {stats['llm']['calls']:,} calls")
        code, wall, stats = build(faulty, f"fake/default?{FAULTS}&seed={args.seed}", documents)
        llm = stats["llm"]
        print(f"faulty: exit {code}, {wall:.1f} s, {llm['calls']:,} calls, {llm['retries']:,} transport retries, "
              f"{llm['failed_attempts']:,} failed attempts counted ({llm['prompt_tokens']:,} prompt tokens in all), "
              f"{llm['parse_retries']:,} corrected answers, {llm['failures']:,} failed calls")
        differing = same_tables(faulty, clean)
        print(f"tables identical to the clean run (ids and values): {differing or 'yes'}")
        checked = subprocess.run([sys.executable, str(SHARED / "tools/check_index.py"), str(faulty / "output"),
                                  "--compare", str(clean / "output")], capture_output=True, text=True)
        print(f"check_index.py --compare: {checked.stdout.strip().splitlines()[-1]}")
        code, wall, stats = build(faulty, f"fake/default?{FAULTS}&seed={args.seed}", documents, "--force")
        print(f"forced rebuild of the faulty index: exit {code}, {stats['llm']['calls']:,} calls, "
              f"{stats['llm']['calls'] - stats['llm']['cache_hits']:,} sent to the model (0: every cached answer "
              f"passed its parser again), tables still identical: {'yes' if not same_tables(faulty, clean) else 'no'}")


if __name__ == "__main__":
    main()
