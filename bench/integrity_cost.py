"""Benchmark (issue 36): what checking every file against the commit's digests costs a reader.

    .venv/bin/python bench/integrity_cost.py [--root DIR] [--runs 5]

Builds a fast index of the podcast corpus (1,669 transcript chunks, fake/embedding vectors for the text units
and entities) in a temporary folder, or uses the index of --root. Then, in this process, the runs taking turns:

- reading every committed table as readers do (OutputStore of the commit: the file's bytes hashed, then parsed)
  against reading the same files with pandas alone (no digest): the price of the check on tables;
- checking the LanceDB files the commit pins (what `query` does before its first search);
- `graphrag-lite check` in full (every table and LanceDB table read whole).

Prints the bytes read and the median and fastest times of each.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pandas as pd
from shared_data import SHARED

REPO = Path(__file__).resolve().parent.parent
ZIP = SHARED / "corpora/podcast-transcripts/kevin-scott-podcasts.zip"
SETTINGS = ("models:\n  default_embedding_model:\n    model: fake/embedding\n"
            "embed_text:\n  model_id: default_embedding_model\n")


def build(folder: Path) -> Path:
    root = folder / "podcasts"
    (root / "input").mkdir(parents=True)
    with zipfile.ZipFile(ZIP) as archive:
        for name in archive.namelist():
            if name.endswith(".txt"):
                (root / "input" / Path(name).name).write_bytes(archive.read(name))
    (root / "settings.yaml").write_text(SETTINGS, encoding="utf-8")
    subprocess.run([str(REPO / ".venv/bin/graphrag-lite"), "index", "--method", "fast", "--root", str(root),
                    "--quiet"], check=True)
    return root


def timed(work, runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.root or build(Path(scratch))
        measure(root, args.runs)


def measure(root: Path, runs: int) -> None:
    from graphrag_lite.config import load_config
    from graphrag_lite.pipeline.committed import open_committed
    from graphrag_lite.pipeline.integrity import check_index
    from graphrag_lite.vector_store import checked_damage

    config = load_config(root)
    committed = open_committed(config.output.base_dir, root)
    store, commit = committed.store, committed.commit
    assert commit is not None and commit.lancedb is not None
    names = list(commit.tables)
    table_bytes = sum(store.path(n).stat().st_size for n in names)
    lance_bytes = sum(path.stat().st_size for path in Path(config.lancedb_uri).rglob("*") if path.is_file())
    print(f"index: {commit.rows.get('text_units', 0):,} text units; {len(names)} tables, {table_bytes / 1e6:.1f} MB; "
          f"LanceDB {lance_bytes / 1e6:.1f} MB")
    results = {"tables read, checked by digest": lambda: [store.read(n) for n in names],
               "tables read by pandas alone": lambda: [pd.read_parquet(store.path(n)) for n in names],
               "LanceDB files checked": lambda: checked_damage(config.lancedb_uri, commit.lancedb),
               "graphrag-lite check (all)": lambda: check_index(config)}
    figures = {what: timed(work, runs) for what, work in results.items()}
    for what, (median, fastest) in figures.items():
        print(f"{what:34} median {median:6.3f} s   fastest {fastest:6.3f} s")
    checked, plain = figures["tables read, checked by digest"][0], figures["tables read by pandas alone"][0]
    print(f"the digest check adds {checked - plain:+.3f} s ({(checked / plain - 1):+.0%}) to reading every table")


if __name__ == "__main__":
    sys.exit(main())
