"""Benchmark check: does this checkout build the same index as another commit's code? For a change that must not
move any final table (issue 38: merge_graph keeping fewer descriptions, in Arrow).

    .venv/bin/python bench/same_index.py OTHER [--method fast|standard] [--corpus podcasts|hotpotqa|sample]
                                         [--documents N]

OTHER is a folder holding another commit's graphrag_lite (e.g. `git archive 17c1268 | tar -x -C /tmp/base`),
run with PYTHONPATH=OTHER. The documents and settings are bench/latency_bound.py's (its bench world: 150 podcast
documents by default; `--corpus sample`: the bundled sample, input/*.txt), with the fake model at zero latency.
Each code indexes its own copy of the project in a subprocess; then every final table is compared value by
value (the dates of files and runs left out) and ../shared/tools/check_index.py checks each index and that the
two have the same ids (--compare). Prints one line per table and the checker's summary; exits 1 when something
differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
from latency_bound import settings, write_corpus

REPO = Path(__file__).resolve().parent.parent
CHECKER = REPO.parent / "shared" / "tools" / "check_index.py"
FINAL_TABLES = ("documents", "text_units", "entities", "relationships", "communities", "community_reports",
                "covariates")
DATE_COLUMNS = ("period", "creation_date")  # the day a community was made, the documents' file times


def build(root: Path, code: Path, method: str, args: argparse.Namespace) -> Path:
    (root / "input").mkdir(parents=True)
    (root / "settings.yaml").write_text(settings(args, []), encoding="utf-8")
    if args.corpus == "sample":
        for document in sorted((REPO / "input").glob("*.txt")):
            (root / "input" / document.name).write_bytes(document.read_bytes())
    else:
        write_corpus(root / "input", args.corpus, args.documents)
    env = {**os.environ, "PYTHONPATH": str(code)}
    # run from the project's folder: from this checkout's, its own graphrag_lite would come first
    done = subprocess.run([sys.executable, "-c", "import graphrag_lite; print(graphrag_lite.__file__)"], env=env,
                          capture_output=True, text=True, check=True, cwd=root)
    print(f"{method} with {done.stdout.strip()}")
    done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--quiet",
                           "--method", method], env=env, capture_output=True, text=True, cwd=root)
    if done.returncode not in (0, 4):  # 4: finished, some summaries cut off by the fake model (reported)
        raise SystemExit(f"index failed ({done.returncode}): {done.stderr[-2000:]}")
    return root / "output"


def differences(ours: Path, theirs: Path) -> int:
    differ = 0
    for table in FINAL_TABLES:
        paths = [output / f"{table}.parquet" for output in (ours, theirs)]
        if not any(p.is_file() for p in paths):
            continue
        a, b = (pd.read_parquet(p).drop(columns=list(DATE_COLUMNS), errors="ignore") for p in paths)
        try:
            pd.testing.assert_frame_equal(a, b, check_exact=True)
            print(f"{table:20} same ({len(a)} rows)")
        except AssertionError as err:
            differ += 1
            print(f"{table:20} DIFFERS: {str(err)[:300]}")
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path)
    parser.add_argument("--method", choices=("fast", "standard"), default="fast")
    parser.add_argument("--corpus", choices=("hotpotqa", "podcasts", "sample"), default="podcasts")
    parser.add_argument("--documents", type=int, default=150)
    args = parser.parse_args()
    args.latency, args.concurrency = 0.0, 25
    with tempfile.TemporaryDirectory() as scratch:
        ours = build(Path(scratch) / "ours", REPO, args.method, args)
        theirs = build(Path(scratch) / "theirs", args.other.resolve(), args.method, args)
        differ = differences(ours, theirs)
        checked = subprocess.run([sys.executable, str(CHECKER), str(ours), "--method", args.method, "--compare",
                                  str(theirs)], capture_output=True, text=True)
        print(checked.stdout.strip().splitlines()[-1] if checked.stdout.strip() else checked.stderr[-500:])
    raise SystemExit(1 if differ or checked.returncode else 0)


if __name__ == "__main__":
    main()
