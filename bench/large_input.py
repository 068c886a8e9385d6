"""Benchmark: the input guards on a large input, through `graphrag-lite index --method fast` in a subprocess.

    .venv/bin/python bench/large_input.py [--mb 200] [--rows 100000] [--only text|csv] [--keep]

Real-ish text: paragraphs of 3 to 8 sentences drawn (seeded) from the five novels of novels-dev and the podcast
transcripts (../shared/corpora, see bench/shared_data.py). In a temporary folder it writes:
- one text file of --mb MB beside a small one, indexed twice: with the default input.max_file_mb (the large
  file is skipped and named: the problem line is printed) and with the limit raised above its size;
- a CSV of --rows rows (a paragraph each), indexed once.
Each stage's time and peak memory come from the run's stats.json (peak_rss_mb: the stage's high-water mark,
including what earlier stages left allocated); the run's peak is the largest of them. The runner resets the
kernel's high-water mark before each stage (/proc/self/clear_refs), so a process-wide maximum (/usr/bin/time -v)
would be the last stage's only, and a stage's peak misses the writing of its tables, which comes after it:
the process's high-water mark is therefore also read every SAMPLE_S seconds while it runs ("sampled"), which
sees all but a peak reset within SAMPLE_S of it.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

from shared_data import shared_path

BIN = Path(sys.executable).parent
SAMPLE_S = 0.02
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


def sentences() -> list[str]:
    """Every sentence of the five novels and of the podcast transcripts."""
    texts = [path.read_text(encoding="utf-8") for path in sorted(shared_path("corpora/novels-dev/books").glob("*.txt"))]
    with zipfile.ZipFile(shared_path("corpora/podcast-transcripts/kevin-scott-podcasts.zip")) as podcasts:
        texts += [podcasts.read(name).decode("utf-8", "replace") for name in podcasts.namelist()
                  if name.endswith(".txt")]
    found = [s.strip() for text in texts for s in SENTENCE_END.split(" ".join(text.split()))]
    return [s for s in found if len(s) > 20]


def paragraphs(pool: list[str], seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    while True:
        yield " ".join(rng.choice(pool) for _ in range(rng.randint(3, 8)))


def write_text(path: Path, pool: list[str], megabytes: float) -> None:
    target, written = int(megabytes * 2**20), 0
    with path.open("w", encoding="utf-8") as out:
        for paragraph in paragraphs(pool, seed=1):
            if written >= target:
                break
            written += out.write(paragraph + "\n\n")


def write_csv(path: Path, pool: list[str], rows: int) -> None:
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "text"])
        for number, paragraph in zip(range(rows), paragraphs(pool, seed=2), strict=False):
            writer.writerow([f"row-{number}", paragraph])


def project(root: Path) -> Path:
    subprocess.run([BIN / "graphrag-lite", "init", "--root", root], check=True, capture_output=True)
    return root


def index(root: Path, *settings: str) -> dict:
    """One `index --method fast` run: its exit code, wall time, sampled peak RSS and stats."""
    command = [BIN / "graphrag-lite", "index", "--root", root, "--method", "fast", "--force"]
    for setting in settings:
        command += ["--set", setting]
    returncode, wall, peak_mb, output = run_sampled(command)
    stats_file = root / "output" / "stats.json"
    return {"exit": returncode, "wall_s": wall, "sampled_rss_mb": peak_mb,
            "stats": json.loads(stats_file.read_text()) if stats_file.exists() else {}, "output": output}


def run_sampled(command: list) -> tuple[int, float, float, str]:
    """Run `command` to its end: its exit code, wall seconds, sampled peak RSS (MB) and output."""
    started = time.perf_counter()
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0]
    sampler = threading.Thread(target=sample_peak, args=(run, peak), daemon=True)
    sampler.start()
    output = run.communicate()[0]
    wall = time.perf_counter() - started
    sampler.join()
    return run.returncode, wall, peak[0] / 1024, output


def sample_peak(run: subprocess.Popen, peak: list[int]) -> None:
    """The largest high-water mark (kB) the running process shows, read every SAMPLE_S seconds."""
    status = Path(f"/proc/{run.pid}/status")
    while run.poll() is None:
        try:
            found = re.search(r"VmHWM:\s+(\d+)", status.read_text())
        except OSError:
            break
        if found:
            peak[0] = max(peak[0], int(found.group(1)))
        time.sleep(SAMPLE_S)


def report(title: str, result: dict) -> None:
    stages = result["stats"].get("stages", {})
    peak = max((stage.get("peak_rss_mb", 0) for stage in stages.values()), default=0)
    print(f"\n{title}: exit {result['exit']}, {result['wall_s']:.1f} s, peak RSS {peak:.0f} MB (the largest stage's; "
          f"sampled, with the writing of tables: {result['sampled_rss_mb']:.0f} MB)")
    for name, stage in stages.items():
        print(f"  {name:30} {stage.get('wall_s', 0):8.1f} s  peak {stage.get('peak_rss_mb', 0):7.0f} MB  "
              f"{stage.get('summary', '')[:110]}")
    if result["exit"] != 0:
        print("  " + "\n  ".join(result["output"].strip().splitlines()[-5:]))


def large_text(folder: Path, pool: list[str], megabytes: float) -> None:
    root = project(folder / "text")
    write_text(root / "input" / "large.txt", pool, megabytes)
    write_text(root / "input" / "small.txt", pool[::-1], 0.05)
    size = (root / "input" / "large.txt").stat().st_size / 2**20
    print(f"large.txt: {size:.1f} MB; small.txt: 0.05 MB")
    skipped = index(root)
    report("default limits", skipped)
    load = skipped["stats"].get("stages", {}).get("load_documents", {})
    print("  problem: " + "\n  problem: ".join(load.get("problems", ["(none)"])))
    report(f"input.max_file_mb={int(size) + 1}", index(root, f"input.max_file_mb={int(size) + 1}"))


def large_csv(folder: Path, pool: list[str], rows: int) -> None:
    root = project(folder / "csv")
    write_csv(root / "input" / "rows.csv", pool, rows)
    print(f"\nrows.csv: {rows:,} rows, {(root / 'input' / 'rows.csv').stat().st_size / 2**20:.1f} MB")
    report("CSV", index(root))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=200, help="size of the large text file")
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the CSV")
    parser.add_argument("--only", choices=("text", "csv"), help="one of the two inputs")
    parser.add_argument("--keep", type=Path, help="build in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    pool = sentences()
    print(f"{len(pool):,} sentences to draw from")
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        if args.only != "csv":
            large_text(folder, pool, args.mb)
        if args.only != "text":
            large_csv(folder, pool, args.rows)


if __name__ == "__main__":
    main()
