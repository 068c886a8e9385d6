"""Benchmark (issue 38, point 3): the 150-document world of bench/latency_bound.py indexed with the index on
s3:// (a local S3-compatible server, moto, on 127.0.0.1) and on local disk: the same entities, relationships,
communities and reports (ids and values), both read by ../shared/tools/check_index.py, and what object storage
costs: wall time, objects and bytes sent, and the answer cache on s3:// too.

    .venv/bin/python bench/object_storage.py [--documents 150] [--latency 0] [--corpus podcasts]

The standard method through the offline fake model (`--latency` seconds a call, 25 in flight), claims off,
one gleaning (latency_bound.py's settings). Each variant runs `graphrag-lite index` in its own process, from
scratch, in a fresh project folder. A last run indexes from scratch on another "machine" (a new working copy)
with `--force`, its every answer from the cache on s3://.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from latency_bound import settings, write_corpus
from shared_data import shared_path

COMPARED = ("entities", "relationships", "communities", "community_reports")
DATED = ("creation_date", "inputs_digest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=150)
    parser.add_argument("--corpus", default="podcasts", choices=["podcasts", "hotpotqa"])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=25)
    args = parser.parse_args()
    env = start_s3()
    with tempfile.TemporaryDirectory(prefix="bench-s3-") as scratch:
        base = Path(scratch)
        corpus = base / "corpus"
        corpus.mkdir()
        write_corpus(corpus, args.corpus, args.documents)
        text = settings(args, [])
        runs = {
            "local disk": run(base / "local", corpus, text, env),
            "s3:// index": run(base / "s3", corpus, text + "output:\n  base_dir: s3://bench/index\n", env),
            "s3:// index and cache": run(base / "s3-cache", corpus, text + "output:\n  base_dir: s3://bench/both\n"
                                         "cache:\n  base_dir: s3://bench/cache\n", env),
        }
        runs["another machine, cache on s3://"] = run(base / "again", corpus, text + "output:\n  base_dir: "
                                                      "s3://bench/both\ncache:\n  base_dir: s3://bench/cache\n", env,
                                                      "--force", fresh=False)
        report(runs, args)


def start_s3() -> dict[str, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    import boto3

    deadline = time.monotonic() + 30
    while True:
        try:
            boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id="bench",
                         aws_secret_access_key="bench", region_name="us-east-1").create_bucket(Bucket="bench")
            break
        except Exception:
            if time.monotonic() > deadline or server.poll() is not None:
                raise
            time.sleep(0.2)
    return env


def run(root: Path, corpus: Path, text: str, env: dict[str, str], *flags: str, fresh: bool = True) -> dict:
    (root / "input").mkdir(parents=True)
    for document in corpus.iterdir():
        os.link(document, root / "input" / document.name)
    (root / "settings.yaml").write_text(text, encoding="utf-8")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--quiet", *flags],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{root.name}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    output = next((p.parent for p in root.rglob("index.json") if "tables" not in p.parts), root / "output")
    stats = json.loads((output / "stats.json").read_text(encoding="utf-8"))
    return {"wall": wall, "output": output, "stats": stats}


def report(runs: dict[str, dict], args: argparse.Namespace) -> None:
    print(f"{args.documents} {args.corpus} documents, standard method, fake model at {args.latency} s a call\n")
    print(f"{'run':34} {'wall s':>7} {'run s':>7} {'sent':>6} {'MB sent':>8} {'fetched':>8} {'calls':>6} "
          f"{'cache hits':>10}")
    for name, result in runs.items():
        stats, moved = result["stats"], result["stats"].get("object_storage", {})
        sent = sum(part.get("objects_sent", 0) for part in moved.values())
        megabytes = sum(part.get("bytes_sent", 0) for part in moved.values()) / 1e6
        fetched = sum(part.get("objects_fetched", 0) for part in moved.values())
        llm = stats.get("llm") or {}
        print(f"{name:34} {result['wall']:7.1f} {stats['wall_s']:7.1f} {sent:6d} {megabytes:8.2f} {fetched:8d} "
              f"{llm.get('calls', 0):6d} {llm.get('cache_hits', 0):10d}")
    local = runs["local disk"]["output"]
    checker = shared_path("tools/check_index.py")
    for name, result in runs.items():
        same = all(equal(local, result["output"], table) for table in COMPARED)
        checked = subprocess.run([sys.executable, str(checker), str(result["output"])], capture_output=True,
                                 text=True)
        rows = {t: len(pd.read_parquet(result["output"] / f"{t}.parquet")) for t in COMPARED}
        print(f"{name}: {rows}; same as local disk: {same}; check_index: exit {checked.returncode} "
              f"({checked.stdout.strip().splitlines()[-1] if checked.stdout.strip() else ''})")


def equal(one: Path, other: Path, table: str) -> bool:
    left, right = pd.read_parquet(one / f"{table}.parquet"), pd.read_parquet(other / f"{table}.parquet")
    dated = [c for c in DATED if c in left]
    try:
        pd.testing.assert_frame_equal(left.drop(columns=dated), right.drop(columns=dated))
    except AssertionError as err:
        print(f"  {table} differs: {str(err)[:300]}")
        return False
    return True


if __name__ == "__main__":
    main()
