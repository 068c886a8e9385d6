"""Benchmark (issue 16): how close a standard index comes to the wall time its own model calls allow.

    .venv/bin/python bench/latency_bound.py [--corpus hotpotqa|podcasts] [--documents N] [--latency 0.5]
                                            [--concurrency 25] [--set section.key=value ...] [--runs N]

The documents are, with `--corpus hotpotqa` (default), the first Wikipedia paragraphs of
../shared/corpora/hotpotqa-100/corpus.json, one file each (100: 100 text units of about 150 tokens); with
`--corpus podcasts`, the first transcript parts of the GraphRAG paper's podcast corpus, two consecutive parts
of an episode per file (150: about 130k words in 274 text units of up to 1,200 tokens, the shape of issue
16's corpus). `--server` runs the fake provider in its own process behind an OpenAI-compatible HTTP server
(graphrag_lite.fake.http_server, the same answers; streamed as the
settings say), as issue 16 measured, so the fake's own work is not charged to the
indexing process. `--set` changes a setting (e.g. `--set extract_graph.gleaning=history`); `--compare` indexes once per
variant (the settings before issue 16, the defaults, each option) and prints a line each.
The standard pipeline indexes them from scratch (no answer cache) through the fake provider answering every
call after a fixed `--latency`, with `--concurrency` calls in flight per model, one gleaning, claims off (the
set-up of issue 16). Requests are what the provider is sent: calls, corrective follow-ups after an unusable
answer, refused attempts. The bound is what latency and concurrency allow for the requests the run actually
made: per stage, ceil(requests / concurrency) rounds of `latency` seconds, but never fewer rounds than the
requests that must follow each other (a text unit's first answer, then its gleaning; a corrective follow-up
after the answer it corrects; for reports, two rounds when a report had to wait for its sub-communities'
reports (its own detail did not fit), else one), summed along the stages, which run one after another.
Requests a stage's early work made (embed_text's text units, asked for while the graph is extracted:
stats.json's `early_llm`) went beside the stages in between, on another model, and are not on that path (the
"early" column; fewer rounds than extraction's). It
prints per stage: requests, prompt and completion tokens, wall time and bound, and the whole run's wall /
bound (issue 16's target: at most 1.2), also without the seconds the run took to start LiteLLM (its import,
about 1.5-2 s before the first call; stats.json's `model_client_start_s`), which the wall includes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import yaml
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
SERVER_PORT = 8799


def write_corpus(folder: Path, corpus: str, count: int) -> None:
    if corpus == "podcasts":
        write_podcasts(folder, count)
        return
    paragraphs = json.loads(shared_path("corpora/hotpotqa-100/corpus.json").read_text(encoding="utf-8"))
    for number, (title, sentences) in enumerate(list(paragraphs.items())[:count]):
        name = "".join(c if c.isalnum() else "-" for c in title)[:60]
        (folder / f"{number:04d}-{name}.txt").write_text(f"{title}\n\n{' '.join(sentences)}\n", encoding="utf-8")


def write_podcasts(folder: Path, count: int) -> None:
    """`count` files of two consecutive transcript parts each, episodes in order."""
    def order(name: str) -> tuple[int, int]:
        numbers = re.findall(r"\d+", name)
        return int(numbers[0]), int(numbers[-1])

    with zipfile.ZipFile(shared_path("corpora/podcast-transcripts/kevin-scott-podcasts.zip")) as archive:
        names = sorted((n for n in archive.namelist() if n.endswith(".txt")), key=order)[: 2 * count]
        for number in range(0, len(names) - 1, 2):
            text = "\n\n".join(archive.read(n).decode("utf-8") for n in names[number:number + 2])
            (folder / f"{number // 2:04d}-{Path(names[number]).stem[:50]}.txt").write_text(text, encoding="utf-8")


def settings(args: argparse.Namespace, changes: list[str]) -> str:
    """The benchmark's settings with `changes` (section.key=value) applied."""
    values = yaml.safe_load(SETTINGS.format(latency=args.latency, concurrency=args.concurrency))
    if getattr(args, "server", 0):  # the same fake answers, from another process over HTTP (fake.http_server)
        for model_id, name in (("default_chat_model", "openai/fake"), ("default_embedding_model",
                                                                       "openai/fake-embedding")):
            values["models"][model_id].update(model=name, api_base=f"http://127.0.0.1:{args.server}/v1",
                                              api_key="sk-fake")
        values["extract_graph"]["format"] = "tuples"  # as fake/default answers (LiteLLM offers JSON for openai/)
    for change in changes:
        key, _, raw = change.partition("=")
        *sections, last = key.split(".")
        node = values
        for section in sections:
            node = node.setdefault(section, {})
        node[last] = yaml.safe_load(raw)
    return yaml.safe_dump(values)


def requests(llm: dict) -> int:
    """What the provider was sent: the calls not answered from the cache, the corrective follow-ups after an
    unusable answer and the attempts it refused or failed (a call's retries), each a request of its own."""
    return llm.get("calls", 0) - llm.get("cache_hits", 0) + llm.get("parse_retries", 0) + \
        llm.get("failed_attempts", 0)


def own_requests(stage: dict) -> int:
    """A stage's requests at its turn: those its early work made before it (Stage.early) left out."""
    return requests(stage.get("llm") or {}) - requests(stage.get("early_llm") or {})


def rounds(name: str, stage: dict, sent: int, concurrency: int) -> int:
    """The fewest rounds of requests a stage needs: by concurrency, and by the requests that must wait for
    others (a report waits for its sub-communities' only when its own detail does not fit: two rounds when
    any did, which is at most the longest real chain; a corrective follow-up waits for the answer it
    corrects)."""
    if sent == 0:
        return 0
    if name.startswith("community_reports"):
        chained = 2 if stage.get("details", {}).get("substituted_contexts") else 1
    else:
        chained = CHAINED_EXTRACTION if stage.get("details", {}).get("calls_per_unit", 1) > 1 else 1
    chained += 1 if (stage.get("llm") or {}).get("parse_retries") else 0
    return max(math.ceil(sent / concurrency), chained)


VARIANTS = {  # --compare: the settings before issue 16, the defaults, and each option of issue 16
    "before (issue 16)": (["summarize_descriptions.join_max_tokens=0", "embed_text.batch_size=16",
                           "embed_text.batch_max_tokens=8191",
                           "embed_text.names=[entity_description,text_unit_text,community_full_content]",
                           "extract_graph.gleaning=history"], []),
    "defaults": ([], []),
    "gleaning history": (["extract_graph.gleaning=history"], []),
    "batch (index --batch)": ([], ["--batch"]),
    "chunk tails joined": (["chunking.min_tail_tokens=100"], []),  # other text units: other ids expected
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=("hotpotqa", "podcasts"), default="hotpotqa")
    parser.add_argument("--documents", type=int, help="default: 100 (hotpotqa), 150 (podcasts)")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--runs", type=int, default=1, help="index this many times and print each run's wall / "
                        "bound and their median (runs vary by about 0.5 s on a 2-core machine); the table is the "
                        "last run's")
    parser.add_argument("--compare", action="store_true", help="index once per variant (VARIANTS) and print "
                        "one line each, with calls and prompt tokens relative to the first")
    parser.add_argument("--server", action="store_const", const=SERVER_PORT, default=0,
                        help="the fake provider in its own process behind HTTP (graphrag_lite.fake.http_server), like "
                        "the OpenAI-compatible server of issue 16, instead of inside the indexing process")
    args = parser.parse_args()
    args.documents = args.documents or (150 if args.corpus == "podcasts" else 100)
    with fake_server(args):
        run(args)


def run(args: argparse.Namespace) -> None:
    if not args.compare:
        ratios = []
        for _ in range(args.runs):
            stats, wall, _ = index_once(args, args.set, [])
            ratios.append(stats.get("wall_s", 0.0) / (critical_path(stats, args) or math.inf))
        report(stats, wall, args)
        if args.runs > 1:
            print(f"wall / bound of the {args.runs} runs: {', '.join(f'{r:.2f}' for r in ratios)}; median "
                  f"{statistics.median(ratios):.2f}")
        return
    variants = {name: variant for name, variant in VARIANTS.items()
                if not (args.server and variant[1])}  # the server is local, and local models take no batch
    runs = {name: index_once(args, args.set + changes, flags) for name, (changes, flags) in variants.items()}
    compare(runs, args)


@contextlib.contextmanager
def fake_server(args: argparse.Namespace) -> Iterator[None]:
    """With --server, the fake model's HTTP server running on SERVER_PORT until the benchmark ends."""
    if not args.server:
        yield
        return
    server = subprocess.Popen([sys.executable, "-m", "graphrag_lite.fake.http_server", "--port", str(args.server),
                               "--latency", str(args.latency)])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{args.server}/v1/models", timeout=1)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("graphrag_lite.fake.http_server did not start") from None
                time.sleep(0.2)
        yield
    finally:
        server.terminate()
        server.wait()


def index_once(args: argparse.Namespace, changes: list[str], flags: list[str]
               ) -> tuple[dict, float, dict[str, set[str]]]:
    """stats.json, the process's wall time, and the ids of entities, relationships and communities."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "input").mkdir()
        (root / "settings.yaml").write_text(settings(args, changes), encoding="utf-8")
        write_corpus(root / "input", args.corpus, args.documents)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--quiet",
                               *flags], capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode == 4:  # finished, some items failed (the fake cuts off its longest answers)
            print(f"note: the index finished with failures: {done.stderr.strip().splitlines()[-1][:300]}")
        elif done.returncode != 0:
            raise SystemExit(f"index failed ({done.returncode}): {done.stderr[-2000:]}")
        stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
        ids = {table: set(pd.read_parquet(root / "output" / f"{table}.parquet", columns=["id"])["id"])
               for table in ("entities", "relationships", "communities")}
    return stats, wall, ids


def compare(runs: dict[str, tuple[dict, float, dict[str, set[str]]]], args: argparse.Namespace) -> None:
    what = "HotpotQA paragraphs" if args.corpus == "hotpotqa" else "podcast files"
    print(f"standard index of {args.documents} {what}, fake provider at {args.latency} s a call, concurrency "
          f"{args.concurrency}, one gleaning, claims off, no cache")
    print(f"{'variant':26}{'requests':>9}{'x':>6}{'prompt tok':>12}{'x':>6}{'compl. tok':>12}{'wall s':>8}"
          f"{'bound s':>8}{'w/b':>6}{'litellm s':>10}{'cost $':>8}  same ids as the first")
    first_calls = first_prompt = 0
    first_ids: dict[str, set[str]] = {}
    for name, (stats, _, ids) in runs.items():
        llm = stats.get("llm") or {}
        calls, prompt = requests(llm), llm.get("prompt_tokens", 0)
        first_calls, first_prompt, first_ids = first_calls or calls, first_prompt or prompt, first_ids or ids
        bound = critical_path(stats, args)
        ratio = f"{stats.get('wall_s', 0.0) / bound:.2f}" if bound else "n/a"
        same = ", ".join(f"{table} {'yes' if ids[table] == first_ids[table] else 'NO'}" for table in ids)
        print(f"{name:26}{calls:>9,}{calls / first_calls:>6.2f}{prompt:>12,}{prompt / first_prompt:>6.2f}"
              f"{llm.get('completion_tokens', 0):>12,}{stats.get('wall_s', 0.0):>8.1f}{bound:>8.1f}{ratio:>6}"
              f"{client_start(stats):>10.1f}{llm.get('cost_usd') or 0:>8.3f}  {same}")


def critical_path(stats: dict, args: argparse.Namespace) -> float:
    """The bound: the stages' rounds of calls, one stage after another."""
    total = 0.0
    for name, stage in stats["stages"].items():
        total += rounds(name, stage, own_requests(stage), args.concurrency) * args.latency
    return total


def report(stats: dict, wall: float, args: argparse.Namespace) -> None:
    what = "HotpotQA paragraphs" if args.corpus == "hotpotqa" else "podcast files"
    print(f"standard index of {args.documents} {what}, fake provider at {args.latency} s a call, "
          f"concurrency {args.concurrency}, one gleaning, claims off, no cache"
          + "".join(f", {change}" for change in args.set))
    print(f"{'stage':24}{'requests':>9}{'early':>6}{'prompt tok':>12}{'compl. tok':>12}{'wall s':>9}{'bound s':>9}")
    total_bound = 0.0
    for name, stage in stats["stages"].items():
        llm = stage.get("llm") or {}
        bound = rounds(name, stage, own_requests(stage), args.concurrency) * args.latency
        total_bound += bound
        print(f"{name:24}{requests(llm):>9,}{requests(stage.get('early_llm') or {}):>6,}"
              f"{llm.get('prompt_tokens', 0):>12,}{llm.get('completion_tokens', 0):>12,}"
              f"{stage.get('wall_s', 0.0):>9.1f}{bound:>9.1f}")
    llm = stats.get("llm") or {}
    print(f"{'all':24}{requests(llm):>9,}{'':>6}{llm.get('prompt_tokens', 0):>12,}"
          f"{llm.get('completion_tokens', 0):>12,}{stats.get('wall_s', 0.0):>9.1f}{total_bound:>9.1f}")
    ratio = f"{stats.get('wall_s', 0.0) / total_bound:.2f}" if total_bound else "n/a (no latency)"
    calls = requests(llm)
    print(f"wall / bound: {ratio} (issue 16's target: at most 1.2); the process took {wall:.1f} s in all "
          f"(start-up included); {stats.get('wall_s', 0.0) / max(calls, 1) * 1000:.1f} ms of run time per call")
    client = client_start(stats)
    if client and total_bound:
        print(f"of the wall, {client:.1f} s started LiteLLM (its import, before the first call); without it, "
              f"wall / bound is {(stats.get('wall_s', 0.0) - client) / total_bound:.2f}")


def client_start(stats: dict) -> float:
    """The seconds the run took to start LiteLLM (recorded by the stage that first needed a model)."""
    return sum(stage.get("model_client_start_s", 0.0) for stage in stats["stages"].values())


if __name__ == "__main__":
    main()
