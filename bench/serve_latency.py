"""Benchmark (issue 17): how fast `graphrag-lite serve` answers once warm.

    .venv/bin/python bench/serve_latency.py [--index fast|standard] [--root DIR] [--questions 200]
                                            [--clients 20]

`--index fast` (default) indexes the whole podcast corpus of ../shared/corpora/podcast-transcripts (1,670
transcript parts, about 1M tokens) with `--method fast` (no model); `--index standard` indexes 300 of its
files with the standard pipeline and the fake model (bench/latency_bound.py's corpus, at zero latency). The
index is built once in --root (default: a folder under the system temp dir, reused by later runs). The
benchmark starts `graphrag-lite serve` on it, then measures over HTTP, one request at a time:
`POST /context/local` for --questions questions (the corpus's 125 questions, then "Who is X?" for its
best-connected entities), `POST /query/local` with the fake model (no latency), `GET /entities?q=` and
`GET /graph/neighbourhood/{id}`; and --clients concurrent clients each sending a mix of those requests,
counting errors. It prints p50 / p95 per request kind against issue 17's targets (context p50 <= 50 ms,
p95 <= 150 ms; query with the fake model p50 <= 100 ms; no errors under 20 clients) and the server's start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
from shared_data import shared_path

FAKE_MODELS = """models:
  default_chat_model:
    model: fake/default
  default_embedding_model:
    model: fake/embedding
extract_claims:
  enabled: false
"""


def build_index(kind: str, root: Path) -> None:
    """The benchmark's index in `root`, unless a completed one is there already (an interrupted one is
    resumed: a half-built index would be measured without its reports)."""
    stats = root / "output" / "stats.json"
    if stats.is_file() and str(json.loads(stats.read_text(encoding="utf-8")).get("status", "")).startswith("completed"):
        return
    (root / "input").mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(shared_path("corpora/podcast-transcripts/kevin-scott-podcasts.zip")) as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".txt"))
        for name in names if kind == "fast" else names[:300]:
            (root / "input" / Path(name).name).write_bytes(archive.read(name))
    (root / "settings.yaml").write_text(FAKE_MODELS, encoding="utf-8")
    method = ["--method", "fast"] if kind == "fast" else []
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--quiet", *method],
                   check=True)
    print(f"built the {kind} index in {time.perf_counter() - started:.0f} s in {root}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def server(root: Path, settings: Sequence[str] = ()) -> Iterator[str]:
    """`graphrag-lite serve` on a free port, with `--set` for each of `settings`, until the block ends; its
    base URL."""
    port = free_port()
    started = time.perf_counter()
    sets = [part for setting in settings for part in ("--set", setting)]
    process = subprocess.Popen([sys.executable, "-m", "graphrag_lite", "serve", "--root", str(root), "--port",
                                str(port), *sets], stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                if process.poll() is not None:
                    raise SystemExit(f"serve exited: {process.stderr.read() if process.stderr else ''}") from None
                time.sleep(0.2)
        print(f"server answering {time.perf_counter() - started:.1f} s after its start (imports, index load)")
        yield base
    finally:
        process.terminate()
        process.wait()


def questions(client: httpx.Client, count: int) -> list[str]:
    with shared_path("corpora/podcast-transcripts/kevin-scott-questions.csv").open(encoding="utf-8") as handle:
        asked = [row[next(iter(row))] for row in csv.DictReader(handle)]
    entities = client.get("/entities", params={"q": "", "limit": 200}).json()["entities"]
    asked += [f"Who is {e['title'].title()} and what do they work on?" for e in entities]
    return asked[:count]


def timed(client: httpx.Client, method: str, path: str, **kwargs: object) -> float:
    started = time.perf_counter()
    response = client.request(method, path, **kwargs)  # type: ignore[arg-type]
    response.raise_for_status()
    return time.perf_counter() - started


def line(name: str, seconds: list[float], target: str) -> None:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    print(f"{name:34}{len(seconds):>6}{statistics.median(seconds) * 1000:>10.1f}{p95 * 1000:>10.1f}  {target}")


def sequential(base: str, count: int) -> None:
    with httpx.Client(base_url=base, timeout=60) as client:
        asked = questions(client, count)
        print(f"{'request':34}{'n':>6}{'p50 ms':>10}{'p95 ms':>10}  issue 17's target")
        line("POST /context/local", [timed(client, "POST", "/context/local", json={"question": q}) for q in asked],
             "p50 <= 50, p95 <= 150")
        line("POST /context/local (no_model)", [timed(client, "POST", "/context/local",
                                                      json={"question": q, "no_model": True}) for q in asked], "")
        line("POST /query/local (fake model)", [timed(client, "POST", "/query/local", json={"question": q})
                                                for q in asked[:50]], "p50 <= 100")
        ids = [e["id"] for e in client.get("/entities", params={"limit": 50}).json()["entities"]]
        line("GET /entities?q=", [timed(client, "GET", "/entities", params={"q": q.split()[-1][:5]})
                                  for q in asked[:100]], "")
        line("GET /graph/neighbourhood/{id}", [timed(client, "GET", f"/graph/neighbourhood/{i}") for i in ids], "")


async def concurrent(base: str, clients: int, per_client: int) -> None:
    """`clients` clients at once, each sending `per_client` requests of every kind in turn."""
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        entities = (await client.get("/entities", params={"limit": 50})).json()["entities"]
        requests = [("POST", "/context/local", {"json": {"question": f"Who is {e['title']}?"}}) for e in entities]
        requests += [("POST", "/query/local", {"json": {"question": f"What did {e['title']} do?"}})
                     for e in entities]
        requests += [("GET", f"/graph/neighbourhood/{e['id']}", {}) for e in entities]
        failures: list[str] = []
        latencies: list[float] = []

        async def one_client(number: int) -> None:
            for k in range(per_client):
                verb, path, options = requests[(number * per_client + k) % len(requests)]
                started = time.perf_counter()
                response = await client.request(verb, path, **options)  # type: ignore[arg-type]
                latencies.append(time.perf_counter() - started)
                if response.status_code != 200:
                    failures.append(f"{verb} {path}: {response.status_code} {response.text[:200]}")

        started = time.perf_counter()
        await asyncio.gather(*(one_client(n) for n in range(clients)))
        wall = time.perf_counter() - started
    line(f"{clients} clients x {per_client} mixed", latencies, "no errors")
    print(f"  {len(latencies)} requests in {wall:.1f} s ({len(latencies) / wall:.0f}/s), {len(failures)} errors"
          + "".join(f"\n  {f}" for f in failures[:5]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", choices=("fast", "standard"), default="fast")
    parser.add_argument("--root", type=Path, help="where the index is built (reused when already there)")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    args = parser.parse_args()
    root = args.root or Path(tempfile.gettempdir()) / f"graphrag-lite-serve-bench-{args.index}"
    build_index(args.index, root)
    with server(root) as base:
        sequential(base, args.questions)
        asyncio.run(concurrent(base, args.clients, 10))


if __name__ == "__main__":
    main()
