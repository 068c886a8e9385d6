"""Sizing (issue 38): what indexing 10k, 100k and 1M documents costs, computed from measured runs.

    .venv/bin/python bench/sizing.py --standard DIR --fast DIR [--sizes 10000,100000,1000000]
                                     [--chat-model gpt-4o-mini] [--embedding-model text-embedding-3-small]
                                     [--rpm 5000] [--tpm 4000000] [--embedding-rpm 5000]
                                     [--embedding-tpm 5000000] [--latency 5]

DIR is a project that `bench/scale.py --keep` left (or any project with an index): its output/stats.json gives
the run's documents, model requests and tokens per stage, its wall time and each stage's peak RSS; its
output folder's size on disk is the index's. Everything per document is that run's figure divided by its
documents, then multiplied by each size: a linear extrapolation, which bench/scale.py shows to hold for time
(within 1.3x from 1k to 100k documents) but which is only an estimate for memory (say so: the peak printed is
the measured run's, at its size).

- Requests are what a provider receives: calls - cache hits + parse retries + failed attempts; chat stages and
  embed_text (the embedding model) apart.
- Dollars at the list prices of LiteLLM's offline price map (online, and in a provider batch: its batch prices,
  else half). The tokens are the offline fake model's: prompt tokens are the real prompts' (the pipeline's
  prompts and the corpus's text), completion tokens are the fake's replies (687 tokens per extraction call at
  30k documents), which a real model's may exceed or fall short of.
- Wall time is the larger of two bounds: the provider's rate limits (requests and tokens per minute, chat and
  embedding apart, each taken alone) and the measured run's own wall per document (the pipeline's own work,
  with the fake answering at once). Reaching the rate limit takes enough requests in flight: rpm x latency / 60
  (printed; `llm.concurrency`), else the latency bound (requests x latency / concurrency) is the wall.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from graphrag_lite.llm.prices import batch_unit_prices, priced, unit_prices
from graphrag_lite.llm.providers import load_litellm

EMBEDDING_STAGE = "embed_text"


@dataclass
class PerDocument:
    """One measured run's figures, per document."""
    label: str
    documents: int
    chat_requests: float
    chat_prompt: float
    chat_completion: float
    embedding_requests: float
    embedding_tokens: float
    wall_s: float
    disk_bytes: float
    peak_rss_mb: float


def requests(llm: dict) -> int:
    return int(llm.get("calls", 0) - llm.get("cache_hits", 0) + llm.get("parse_retries", 0)
               + llm.get("failed_attempts", 0))


def measured(label: str, project: Path) -> PerDocument:
    output = project / "output"
    stats = json.loads((output / "stats.json").read_text(encoding="utf-8"))
    documents = sum(stats["stages"]["load_documents"]["rows_out"].values())
    chat = {"requests": 0, "prompt": 0, "completion": 0}
    embedding = {"requests": 0, "tokens": 0}
    for name, stage in stats["stages"].items():
        llm = stage.get("llm") or {}
        if name == EMBEDDING_STAGE:
            embedding["requests"] += requests(llm)
            embedding["tokens"] += llm.get("prompt_tokens", 0)
        else:
            chat["requests"] += requests(llm)
            chat["prompt"] += llm.get("prompt_tokens", 0)
            chat["completion"] += llm.get("completion_tokens", 0)
    files = {(path.stat().st_dev, path.stat().st_ino): path.stat().st_size for path in output.rglob("*")
             if path.is_file()}  # once each: a committed table and its GraphRAG-layout name are one file
    disk = sum(files.values())
    peak = max(float(stage.get("peak_rss_mb") or 0) for stage in stats["stages"].values())
    return PerDocument(label, documents, chat["requests"] / documents, chat["prompt"] / documents,
                       chat["completion"] / documents, embedding["requests"] / documents,
                       embedding["tokens"] / documents, float(stats["wall_s"]) / documents, disk / documents, peak)


def dollars(model: str, prompt: float, completion: float, batch: bool) -> float | None:
    """USD at the price map's online or batch prices (LiteLLM's offline map; None for a model it lacks)."""
    litellm = load_litellm([])
    prices = batch_unit_prices(litellm, model) if batch else unit_prices(litellm, model)
    return priced(prices, int(prompt), int(completion))


def wall_hours(run: PerDocument, size: int, args: argparse.Namespace) -> tuple[float, str]:
    """The largest bound on the wall time at `size` documents, and which bound it is."""
    minutes = 60.0
    bounds = {
        "chat requests a minute": run.chat_requests * size / args.rpm * minutes,
        "chat tokens a minute": (run.chat_prompt + run.chat_completion) * size / args.tpm * minutes,
        "embedding requests a minute": run.embedding_requests * size / args.embedding_rpm * minutes,
        "embedding tokens a minute": run.embedding_tokens * size / args.embedding_tpm * minutes,
        "own work": run.wall_s * size,
    }
    name = max(bounds, key=lambda key: bounds[key])
    return bounds[name] / 3600, name


def money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.0f}" if value >= 10 else f"${value:,.2f}"


def print_run(run: PerDocument, args: argparse.Namespace, sizes: list[int]) -> None:
    print(f"\n{run.label}: measured at {run.documents:,} documents; per document {run.chat_requests:.2f} chat and "
          f"{run.embedding_requests:.3f} embedding requests, {run.chat_prompt:,.0f} prompt + "
          f"{run.chat_completion:,.0f} completion tokens, {run.embedding_tokens:,.0f} embedded tokens, "
          f"{run.wall_s * 1000:.1f} ms of wall, {run.disk_bytes / 1024:.1f} KB on disk; peak RSS "
          f"{run.peak_rss_mb / 1024:.2f} GB at that size")
    print("| documents | requests | prompt tokens | completion tokens | online | batch | wall (bound) | disk |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        chat_prompt, chat_completion = run.chat_prompt * size, run.chat_completion * size
        embedded = run.embedding_tokens * size
        online = [dollars(args.chat_model, chat_prompt, chat_completion, False),
                  dollars(args.embedding_model, embedded, 0, False)]
        batch = [dollars(args.chat_model, chat_prompt, chat_completion, True), online[1]]  # embeddings online
        hours, bound = wall_hours(run, size, args)
        print(f"| {size:,} | {(run.chat_requests + run.embedding_requests) * size:,.0f} | "
              f"{(chat_prompt + embedded) / 1e6:,.0f}M | {chat_completion / 1e6:,.0f}M | {total(online)} | "
              f"{total(batch)} | {hours:,.1f} h ({bound}) | {run.disk_bytes * size / 1e9:,.1f} GB |")


def total(parts: list[float | None]) -> str:
    return money(sum(part for part in parts if part is not None)) if any(p is not None for p in parts) else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--standard", type=Path, help="a standard-method project (fake model) with its index")
    parser.add_argument("--fast", type=Path, help="a fast-method project with its index")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--chat-model", default="gpt-4o-mini")
    parser.add_argument("--embedding-model", default="text-embedding-3-small")
    parser.add_argument("--rpm", type=float, default=5000, help="chat requests per minute")
    parser.add_argument("--tpm", type=float, default=4_000_000, help="chat tokens per minute")
    parser.add_argument("--embedding-rpm", type=float, default=5000)
    parser.add_argument("--embedding-tpm", type=float, default=5_000_000)
    parser.add_argument("--latency", type=float, default=5.0, help="seconds per model request")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"chat {args.chat_model} at {args.rpm:,.0f} requests and {args.tpm:,.0f} tokens a minute; embeddings "
          f"{args.embedding_model} at {args.embedding_rpm:,.0f} and {args.embedding_tpm:,.0f}; to reach the chat "
          f"rate limit at {args.latency:g} s a request takes {args.rpm * args.latency / 60:,.0f} requests in "
          "flight (llm.concurrency)")
    for label, project in (("standard method", args.standard), ("fast method", args.fast)):
        if project is not None:
            print_run(measured(label, project), args, sizes)


if __name__ == "__main__":
    main()
