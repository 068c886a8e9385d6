"""Benchmark (issue 36, item 6): does `graphrag-lite serve` stay responsive while it is busy searching?

    .venv/bin/python bench/serve_under_load.py [--clients 50] [--seconds 30] [--root DIR]

Indexes the bundled sample (input/, The Diary of Samuel Pepys) with `--method fast` in a temporary folder
(or in --root, reused when already built), starts `graphrag-lite serve` on it with no chat model
(`*_search.chat_model_id=null`, as `make demo` asks: the answer is the ranked evidence), then for --seconds:

- --clients concurrent clients (in a process of their own) each send, one after another, a mix of
  `POST /query/local` (35%), `/query/global` (15%), `/query/basic` (20%) and `GET /entities?q=` (30%);
- a probe (in this process, alone on its connection) sends `GET /health` every 20 ms.

It prints the request counts, errors and p50 / p95 / p99 latency per kind, and the probe's, against the
goal: /health p95 <= 50 ms under 50 clients.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import httpx
from serve_latency import server  # the server's start and end, shared by the serving benchmarks

REPO = Path(__file__).resolve().parents[1]
NO_CHAT_MODEL = ["local_search.chat_model_id=null", "global_search.chat_model_id=null",
                 "basic_search.chat_model_id=null"]
QUESTIONS = ["Who went to Woolwich with Sir W. Pen?", "What happened at the theatre?", "Who is Sir William Batten?",
             "What did Pepys do at the Wardrobe?", "Who dined with my Lord Sandwich?",
             "What is said about the King's coronation?", "Where did Pepys go by water?",
             "What did Mr. Moore tell Pepys?", "What are the main themes of the diary?",
             "What happened at Brampton after my uncle Robert died?"]
MIX = [("local", 35), ("global", 15), ("basic", 20), ("entities", 30)]
PROBE_EVERY_S = 0.02
GOAL_HEALTH_P95_MS = 50.0


def build_index(root: Path) -> None:
    """The sample indexed with the fast method in `root`, unless a completed index is there already."""
    if (root / "output" / "stats.json").is_file():
        return
    (root / "input").mkdir(parents=True, exist_ok=True)
    for document in (REPO / "input").glob("*.txt"):
        shutil.copy(document, root / "input" / document.name)
    shutil.copy(REPO / "settings.yaml", root / "settings.yaml")  # the sample's settings (the offline fake model)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--method", "fast",
                    "--quiet"], check=True)
    print(f"indexed the sample with --method fast in {time.perf_counter() - started:.0f} s in {root}")


def load(base: str, clients: int, seconds: float, titles: list[str], started: EventType,
         results: multiprocessing.Queue) -> None:
    """The clients' process: `clients` clients sending the mix for `seconds`; (kind, latency s, status) each.
    `started` is set when they begin."""
    results.put(asyncio.run(_load(base, clients, seconds, titles, started)))


async def _load(base: str, clients: int, seconds: float, titles: list[str],
                started: EventType) -> list[tuple[str, float, int]]:
    done: list[tuple[str, float, int]] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        deadline = time.perf_counter() + seconds
        started.set()

        async def one_client(number: int) -> None:
            pick = random.Random(number)
            while time.perf_counter() < deadline:
                kind = pick.choices([k for k, _ in MIX], [w for _, w in MIX])[0]
                started = time.perf_counter()
                if kind == "entities":
                    word = pick.choice(titles).split()[0][:5]
                    response = await client.get("/entities", params={"q": word})
                else:
                    response = await client.post(f"/query/{kind}", json={"question": pick.choice(QUESTIONS)})
                done.append((kind, time.perf_counter() - started, response.status_code))

        await asyncio.gather(*(one_client(n) for n in range(clients)))
    return done


def probe(base: str, until: float) -> list[float]:
    """GET /health every PROBE_EVERY_S until `until` (perf_counter), one at a time; the latencies."""
    latencies = []
    with httpx.Client(base_url=base, timeout=60) as client:
        while time.perf_counter() < until:
            started = time.perf_counter()
            client.get("/health").raise_for_status()
            latencies.append(time.perf_counter() - started)
            time.sleep(max(0.0, PROBE_EVERY_S - latencies[-1]))
    return latencies


def percentiles(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    pick = lambda share: ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000  # noqa: E731
    return f"{pick(0.5):>9.1f}{pick(0.95):>9.1f}{pick(0.99):>9.1f}{ordered[-1] * 1000:>9.1f}"


def report(done: list[tuple[str, float, int]], health: list[float], seconds: float) -> None:
    by_kind: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    for kind, latency, status in done:
        by_kind[kind].append(latency)
        errors[kind] += status != 200
    print(f"{'request':22}{'n':>7}{'errors':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for kind, _ in MIX:
        name = "GET /entities?q=" if kind == "entities" else f"POST /query/{kind}"
        if by_kind[kind]:
            print(f"{name:22}{len(by_kind[kind]):>7}{errors[kind]:>8}{percentiles(by_kind[kind])}")
    print(f"{'GET /health (probe)':22}{len(health):>7}{0:>8}{percentiles(health)}")
    p95 = sorted(health)[min(len(health) - 1, int(0.95 * len(health)))] * 1000
    print(f"{len(done)} load requests in {seconds:.0f} s ({len(done) / seconds:.1f}/s); /health p95 {p95:.1f} ms: "
          f"{'meets' if p95 <= GOAL_HEALTH_P95_MS else 'misses'} the goal (p95 <= {GOAL_HEALTH_P95_MS:.0f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--root", type=Path, help="where the sample is indexed (reused when already there)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="serve-under-load-") as scratch:
        root = args.root or Path(scratch)
        build_index(root)
        with server(root, NO_CHAT_MODEL) as base:
            idle = probe(base, time.perf_counter() + 2)
            print(f"idle: GET /health p50 / p95 {percentiles(idle).split()[0]} / {percentiles(idle).split()[1]} ms")
            titles = [e["title"] for e in httpx.get(f"{base}/entities", params={"limit": 200}).json()["entities"]]
            results: multiprocessing.Queue = multiprocessing.Queue()
            started = multiprocessing.Event()
            clients = multiprocessing.Process(target=load, args=(base, args.clients, args.seconds, titles, started,
                                                                 results))
            clients.start()
            started.wait()
            health = probe(base, time.perf_counter() + args.seconds)
            done = results.get()
            clients.join()
    print(f"{args.clients} clients for {args.seconds:.0f} s against the sample's fast index, no chat model:")
    report(done, health, args.seconds)


if __name__ == "__main__":
    main()
