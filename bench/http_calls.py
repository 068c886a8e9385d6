"""Benchmark (issue 37): what a model call costs the indexing process when the model is an OpenAI-compatible
server on this machine, as a fast vLLM or llama.cpp server is.

    .venv/bin/python bench/http_calls.py [--documents 150] [--latency 0] [--concurrency 25]
                                         [--variants defaults,stream-off,litellm] [--nano PYTHON] [--profile]

The fake model answers from its own process behind HTTP (graphrag_lite.fake.http_server, on 127.0.0.1), so
the indexing process pays for what a real server costs a client: HTTP, server-sent events, JSON. The corpus
and settings are bench/latency_bound.py's (`--corpus podcasts`: 150 files of the GraphRAG paper's podcast
transcripts, 274 text units; or HotpotQA paragraphs, one file each; one gleaning, claims off, no answer cache,
`--concurrency` calls in flight). The defaults' tables are compared, id for id, with the same index built
with the fake model in the indexing process (no HTTP). Variants, one after another in this sitting:

- defaults: the settings as shipped (a local server: `stream: auto` streams, `client: auto` talks HTTP);
- stream-off: `stream: false`; stream-on: `stream: true` (every chat call streamed);
- litellm: `client: litellm`, every call through LiteLLM, streamed (the defaults before issue 37);
- nano: with `--nano PYTHON`, nano-graphrag 0.0.8.2 installed in that interpreter
  (`python -m venv V && V/bin/pip install nano-graphrag==0.0.8.2`), its default OpenAI functions pointed at the
  same server (OPENAI_BASE_URL), one gleaning, chunks 1200/100, cache off, 25 calls in flight.

Each line: wall time, the process's own CPU (user + system, from wait4), the requests and prompt tokens the
server counted, CPU per request, and for graphrag-lite the critical-path bound of bench/latency_bound.py at
`--latency`. `--profile` runs the defaults once more under cProfile and splits the process's CPU by where
it was spent: our code, LiteLLM, the HTTP client, JSON, token counting, asyncio, the tables (pandas, Arrow,
LanceDB), start-up imports.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pstats
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

import latency_bound
import pandas as pd

PORT = 8797
WAITING = "waiting (idle, not CPU)"
NANO_SCRIPT = """
import sys, pathlib
from nano_graphrag import GraphRAG
folder, work = pathlib.Path(sys.argv[1]), sys.argv[2]
texts = [p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.txt"))]
rag = GraphRAG(working_dir=work, enable_llm_cache=False, entity_extract_max_gleaning=1, chunk_token_size=1200,
               chunk_overlap_token_size=100, best_model_max_async=25, cheap_model_max_async=25,
               embedding_func_max_async=25)
rag.insert(texts)
"""
VARIANTS = {"defaults": [], "stream-off": ["models.default_chat_model.stream=false"],
            "stream-on": ["models.default_chat_model.stream=true"],
            "litellm": ["models.default_chat_model.client=litellm", "models.default_embedding_model.client=litellm",
                        "models.default_chat_model.stream=true"]}
# the CLI under cProfile (its clock: a CPU clock costs a system call per event, which swamps the figures; the
# wall clock's idle time is epoll's, told apart below)
PROFILED = """
import cProfile, runpy, sys
out = sys.argv[1]
sys.argv = ["graphrag-lite", *sys.argv[4:]]
profiler = cProfile.Profile()
try:
    profiler.runcall(runpy.run_module, "graphrag_lite", run_name="__main__")
except SystemExit:
    pass
profiler.dump_stats(out)
"""
# where a profiled function's own time is charged, by the first fragment of its file's path (or, for a C
# function, of its name) that matches
PLACES = (("graphrag_lite", "our code"), ("litellm", "LiteLLM"), ("aiohttp", "HTTP client"), ("httpx", "HTTP client"),
          ("httpcore", "HTTP client"), ("yarl", "HTTP client"), ("multidict", "HTTP client"), ("/json/", "JSON"),
          ("_json", "JSON"), ("tiktoken", "token counting"), ("asyncio", "asyncio"), ("selectors", "asyncio"),
          ("pandas", "tables"), ("pyarrow", "tables"), ("lancedb", "tables"), ("lance", "tables"),
          ("numpy", "tables"), ("igraph", "graph"), ("leidenalg", "graph"), ("<frozen importlib", "imports"),
          ("pydantic", "pydantic"), ("sqlite3", "answer cache (sqlite)"), ("socket", "HTTP client"),
          ("CoreBPE", "token counting"), ("epoll", WAITING), ("marshal", "imports"), ("_imp.", "imports"),
          ("compile", "imports"), ("posix", "files"), ("_io.", "files"), ("zlib", "files"), ("_hashlib", "files"))


def server(latency: float) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "graphrag_lite.fake.http_server", "--port", str(PORT),
                                "--latency", str(latency)])
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/v1/models", timeout=1)
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("graphrag_lite.fake.http_server did not start") from None
            time.sleep(0.2)


def served() -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/stats", timeout=5) as answer:
        return json.loads(answer.read())


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, the process's own CPU seconds (user + system), its stderr."""
    with tempfile.TemporaryFile() as said:  # a file, not a pipe: a chatty process would fill a pipe and stall
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=said, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        said.seek(0)
        error = said.read().decode("utf-8", "replace")
    if os.waitstatus_to_exitcode(status) not in (0, 4):
        raise SystemExit(f"{command[:4]} failed: {error[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, error


def project(folder: Path, args: argparse.Namespace, changes: list[str], over_http: bool = True) -> Path:
    args.server = PORT if over_http else 0
    (folder / "settings.yaml").write_text(latency_bound.settings(args, changes), encoding="utf-8")
    return folder


def table_ids(output: Path) -> dict[str, list[str]]:
    return {table: pd.read_parquet(output / f"{table}.parquet", columns=["id"])["id"].tolist()
            for table in ("entities", "relationships", "communities", "community_reports")}


def in_process_ids(corpus: Path, args: argparse.Namespace) -> dict[str, list[str]]:
    """The tables' ids of the same index with the fake model in the indexing process (no HTTP)."""
    with tempfile.TemporaryDirectory() as work:
        root = project(Path(work), args, ["extract_graph.format=tuples"], over_http=False)
        (root / "input").symlink_to(corpus)
        timed([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--quiet"])
        return table_ids(root / "output")


def ours(corpus: Path, args: argparse.Namespace, changes: list[str], profile: Path | None = None) -> dict:
    with tempfile.TemporaryDirectory() as work:
        root = project(Path(work), args, changes)
        (root / "input").symlink_to(corpus)
        before = served()
        command = ["-m", "graphrag_lite", "index", "--root", str(root), "--quiet"]
        wall, cpu, _ = timed([sys.executable] + (["-c", PROFILED, str(profile)] if profile else []) + command)
        stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
        ids = table_ids(root / "output")
        after = served()
        # the same run again, every call answered from the answer cache: the CPU of everything but the calls
        cached = timed([sys.executable, *command, "--force"])[1] if not profile else math.nan
    bound = latency_bound.critical_path(stats, args) if args.latency else 0.0
    return {"wall": wall, "cpu": cpu, "requests": after["chat"] + after["embeddings"] - before["chat"] -
            before["embeddings"], "prompt": after["prompt_tokens"] - before["prompt_tokens"], "bound": bound,
            "server_cpu": after["cpu_s"] - before["cpu_s"],
            "start": latency_bound.client_start(stats), "cached": cached,
            "streamed": after["streamed"] - before["streamed"], "ids": ids}


def nano(corpus: Path, python: str) -> dict:
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{PORT}/v1", "OPENAI_API_KEY": "sk-fake"}
    with tempfile.TemporaryDirectory() as work:
        before = served()
        wall, cpu, _ = timed([python, "-c", NANO_SCRIPT, str(corpus), work], env)
    after = served()
    return {"wall": wall, "cpu": cpu, "requests": after["chat"] + after["embeddings"] - before["chat"] -
            before["embeddings"], "prompt": after["prompt_tokens"] - before["prompt_tokens"], "bound": 0.0,
            "start": 0.0, "cached": math.nan, "streamed": after["streamed"] - before["streamed"],
            "server_cpu": after["cpu_s"] - before["cpu_s"]}


def split(profile: Path) -> Counter[str]:
    """The profiled process's own time by place (PLACES), each function's own time charged once."""
    places: Counter[str] = Counter()
    for (path, _, function), (_, _, own, _, _) in pstats.Stats(str(profile)).stats.items():  # type: ignore[attr-defined]
        where = function if path == "~" else path
        place = next((name for fragment, name in PLACES if fragment in where), "other (Python, C built-ins)")
        places[place] += own
    return places


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=("hotpotqa", "podcasts"), default="podcasts")
    parser.add_argument("--documents", type=int, default=150)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--variants", default="defaults,stream-off,stream-on", help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--nano", metavar="PYTHON", help="an interpreter with nano-graphrag 0.0.8.2 installed")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    process = server(args.latency)
    try:
        with tempfile.TemporaryDirectory() as folder:
            corpus = Path(folder)
            latency_bound.write_corpus(corpus, args.corpus, args.documents)
            runs = {name: ours(corpus, args, VARIANTS[name]) for name in args.variants.split(",") if name}
            if args.nano:
                runs["nano-graphrag"] = nano(corpus, args.nano)
            report(runs, args)
            if "defaults" in runs:
                same = {table: ids == runs["defaults"]["ids"][table]
                        for table, ids in in_process_ids(corpus, args).items()}
                print("the defaults' tables against the same index with the fake in process: "
                      + ", ".join(f"{table} {'same ids' if alike else 'OTHER IDS'}" for table, alike in same.items()))
            if args.profile:
                profile = Path(folder).parent / "http_calls.prof"
                run = ours(corpus, args, [], profile)
                print_split(split(profile), run)
    finally:
        process.terminate()
        process.wait()


def report(runs: dict[str, dict], args: argparse.Namespace) -> None:
    what = "HotpotQA paragraphs" if args.corpus == "hotpotqa" else "podcast files"
    print(f"{args.documents} {what}, standard index, fake model over HTTP at {args.latency} s a call, "
          f"concurrency {args.concurrency}, one gleaning, claims off, no cache ({time.strftime('%Y-%m-%d %H:%M')})")
    print(f"{'variant':16}{'wall s':>8}{'cpu s':>8}{'requests':>10}{'streamed':>9}{'prompt tok':>12}{'cpu ms/req':>12}"
          f"{'cached cpu s':>13}{'calls ms/req':>13}{'server ms/req':>14}{'bound s':>9}{'wall/bound':>11}")
    for name, run in runs.items():
        per_call = run["cpu"] / max(run["requests"], 1) * 1000
        calls = (run["cpu"] - run["cached"]) / max(run["requests"], 1) * 1000
        ratio = f"{run['wall'] / run['bound']:.2f}" if run["bound"] else "-"
        print(f"{name:16}{run['wall']:>8.1f}{run['cpu']:>8.1f}{run['requests']:>10,}{run['streamed']:>9,}"
              f"{run['prompt']:>12,}"
              f"{per_call:>12.1f}{run['cached']:>13.1f}{calls:>13.1f}"
              f"{run['server_cpu'] / max(run['requests'], 1) * 1000:>14.1f}{run['bound'] or math.nan:>9.1f}{ratio:>11}")
    print("cpu: the process's own (user + system), start-up included; cached cpu: the same run again with every "
          "call answered from the answer cache (index --force); calls ms/req: the difference, per request; "
          "server ms/req: the fake server's own CPU per request (its answers take that much longer than --latency)")
    if "nano-graphrag" in runs and "defaults" in runs:
        print(f"defaults' wall / nano-graphrag's: {runs['defaults']['wall'] / runs['nano-graphrag']['wall']:.2f}")


def print_split(places: Counter[str], run: dict) -> None:
    total = sum(seconds for place, seconds in places.items() if place != WAITING)
    print(f"\nwhere the defaults' main thread spends its time (cProfile, each function's own; {run['requests']:,} "
          f"requests; shares of the time not waiting; the profiler itself inflates small functions):")
    for place, seconds in places.most_common():
        share = f"{seconds / total:>7.0%}" if place != WAITING else f"{'':>7}"
        print(f"  {place:30}{seconds:>8.2f} s{share}{seconds / max(run['requests'], 1) * 1000:>9.2f} ms/request")


if __name__ == "__main__":
    main()
