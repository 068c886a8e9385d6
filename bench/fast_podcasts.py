"""Benchmark: index the whole podcast corpus (1,669 transcript chunks, about 1M tokens) with the fast method.

    .venv/bin/python bench/fast_podcasts.py [--zip ../shared/corpora/podcast-transcripts/kevin-scott-podcasts.zip]

Runs `graphrag-lite index --method fast` in a fresh project (a subprocess, so its memory is its own) and
prints the wall time, the peak memory of the whole run, and the counts and time of every stage from
stats.json. Goal: under 5 minutes and 2 GB here.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from shared_data import SHARED

DEFAULT_ZIP = SHARED / "corpora/podcast-transcripts/kevin-scott-podcasts.zip"
SETTINGS = "embed_text:\n  model_id: null\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zip", type=Path, default=DEFAULT_ZIP)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        zipfile.ZipFile(args.zip).extractall(root)  # writes root/input/*.txt
        (root / "settings.yaml").write_text(SETTINGS)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--method", "fast"],
                       check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        stats = json.loads((root / "output" / "stats.json").read_text())
    print(f"fast index of {args.zip.name}: {wall:.1f} s wall, peak memory {peak:,.0f} MB")
    for name, stage in stats["stages"].items():
        print(f"  {name:30s} {stage['wall_s']:7.2f} s  peak {stage['peak_rss_mb']:7.0f} MB  {stage['summary']}")


if __name__ == "__main__":
    main()
