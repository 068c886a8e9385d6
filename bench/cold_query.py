"""Benchmark (issue 17, point 4): how long a cold `graphrag-lite` process takes, and which heavy libraries it
imports.

    .venv/bin/python bench/cold_query.py [--root DIR] [--runs 5] [--vectors]

Builds a fast index of the bundled sample (input/; with `--vectors`, embedded by fake/embedding) in a temporary
folder, or uses the index of --root (a fast index built without an embedding model, or with fake/embedding).
Then runs each command in a new process, `--runs` times, the commands taking turns so that the load of a shared
machine falls on all of them alike; prints the median and the fastest wall time of each and whether it
imported LiteLLM, LanceDB, pandas and matplotlib (the names left in sys.modules when the process exits):

- `graphrag-lite --help` and `graphrag-lite query --help`;
- `query local|basic|global --no-model`: the ranked evidence, no model; target for local: <= 2.5 s;
- `query local|global` with the fake provider (fake/default chat, fake/embedding), --no-cache so that every
  run calls the model: these import LiteLLM, as any query that calls a model must.

The first run of a command may also read the libraries from disk; the median is the figure to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("litellm", "lancedb", "pandas", "matplotlib")
TARGET = ("query local --no-model", 2.5)  # seconds, issue 17
LOCAL_QUESTION = "Who went to Woolwich with Sir W. Pen?"  # the Makefile's demo questions
GLOBAL_QUESTION = "What happened at the theatre?"
FAKE_SETTINGS = ("models:\n  default_chat_model:\n    model: fake/default\n"
                 "  default_embedding_model:\n    model: fake/embedding\n")
# The CLI as its entry point runs it, plus a record of the modules loaded, written when the process exits
# (after the command's own exit, whatever its code).
PROBE = """
import atexit, json, runpy, sys
def record(path=sys.argv[1]):
    with open(path, "w", encoding="utf-8") as out:
        json.dump(sorted(sys.modules), out)
atexit.register(record)
sys.argv = ["graphrag-lite", *sys.argv[2:]]
runpy.run_module("graphrag_lite", run_name="__main__")
"""


@dataclass
class Command:
    label: str
    args: list[str]
    seconds: list[float] = field(default_factory=list)
    modules: set[str] = field(default_factory=set)


def build_index(root: Path, vectors: bool) -> None:
    (root / "input").mkdir(parents=True)
    for document in sorted((REPO / "input").glob("*.txt")):
        shutil.copy(document, root / "input" / document.name)
    (root / "settings.yaml").write_text(FAKE_SETTINGS, encoding="utf-8")
    embedded = ["--set", "embed_text.model_id=default_embedding_model"] if vectors else []
    done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--method", "fast",
                           "--quiet", *embedded], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"indexing the sample failed:\n{done.stdout}{done.stderr}")


def index_settings(root: Path) -> list[str]:
    """--set options naming the index the project's settings name: its tables and its LanceDB database."""
    from graphrag_lite.config import load_config

    config = load_config(root)
    return ["--set", f"output.base_dir={config.output.base_dir}",
            "--set", f"vector_store.db_uri={config.vector_store.db_uri}"]


def commands(root: Path, fake_root: Path) -> list[Command]:
    """No-model runs use the project's own settings; model runs the fake settings of `fake_root`, over the
    same index."""
    # --no-cache: a question of an index with vectors is embedded in every run, as a new question is
    project, fake = ["--root", str(root), "--no-cache"], ["--root", str(fake_root), *index_settings(root), "--no-cache"]
    return [
        Command("--help", ["--help"]),
        Command("query --help", ["query", "--help"]),
        Command("query local --no-model", ["query", "local", "--no-model", LOCAL_QUESTION, *project]),
        Command("query basic --no-model", ["query", "basic", "--no-model", LOCAL_QUESTION, *project]),
        Command("query global --no-model", ["query", "global", "--no-model", GLOBAL_QUESTION, *project]),
        Command("query local (fake model)", ["query", "local", LOCAL_QUESTION, *fake]),
        Command("query global (fake model)", ["query", "global", GLOBAL_QUESTION, *fake]),
    ]


def run_once(command: Command, folder: Path) -> None:
    record = folder / "modules.json"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, str(record), *command.args], capture_output=True, text=True)
    command.seconds.append(time.perf_counter() - started)
    if done.returncode or not done.stdout.strip():
        sys.exit(f"`graphrag-lite {' '.join(command.args)}` failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    command.modules = set(json.loads(record.read_text(encoding="utf-8")))


def report(results: list[Command], runs: int) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"cold processes, {runs} runs each ({os.cpu_count()} CPUs, load average {load}):")
    print(f"  {'command':<28} {'median':>8} {'min':>8}   " + " ".join(f"{m:<10}" for m in HEAVY))
    for command in results:
        imported = " ".join(f"{'yes' if m in command.modules else 'no':<10}" for m in HEAVY)
        print(f"  {command.label:<28} {statistics.median(command.seconds):6.2f} s {min(command.seconds):6.2f} s   "
              f"{imported}")
    label, limit = TARGET
    median = statistics.median(next(c for c in results if c.label == label).seconds)
    print(f"target: {label} <= {limit} s (median): {median:.2f} s, {'met' if median <= limit else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="a project with a built fast index (default: index the sample "
                        "in a temporary folder)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--vectors", action="store_true", help="index the sample with fake/embedding vectors, so "
                        "that a local or basic query embeds its question (with the fake plug-in, no LiteLLM)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        root = args.root.resolve() if args.root else folder / "sample"
        if args.root is None:
            print("indexing the bundled sample (fast method) ...")
            build_index(root, args.vectors)
        fake_root = folder / "fake"
        fake_root.mkdir()
        (fake_root / "settings.yaml").write_text(FAKE_SETTINGS, encoding="utf-8")
        results = commands(root, fake_root)
        for _ in range(args.runs):
            for command in results:
                run_once(command, folder)
        report(results, args.runs)


if __name__ == "__main__":
    main()
