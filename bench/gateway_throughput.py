"""Benchmark: gateway throughput against the fake provider, and the cache-hit path.

    .venv/bin/python bench/gateway_throughput.py [--calls 1000] [--latency 0.2] [--concurrency 25]

With a 200 ms model and 25 calls in flight the ideal is 125 calls/s; the figure printed is the achieved
rate and its fraction of the ideal (the goal is >= 0.9), plus the CPU time per call. Then the same calls
again, all answered from the cache.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from graphrag_lite.config import CacheConfig, GraphRagConfig, ModelConfig
from graphrag_lite.fake.provider import STATS
from graphrag_lite.llm.gateway import Gateway


async def run_calls(gateway: Gateway, prompts: list[str]) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(gateway.chat("m", [{"role": "user", "content": p}], stage="bench", step="answer")
                           for p in prompts))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--jitter", type=float, default=0.0,
                        help="latency varies uniformly by this fraction either way (mean unchanged)")
    args = parser.parse_args()
    prompts = [f"Question {i}: what did Pepys do at the Navy Office on day {i}?" for i in range(args.calls)]
    with tempfile.TemporaryDirectory() as folder:
        cfg = GraphRagConfig(models={"m": ModelConfig(model=f"fake/default?latency={args.latency}&jitter={args.jitter}",
                                                      concurrency=args.concurrency)},
                             cache=CacheConfig(base_dir=Path(folder)))
        gateway = Gateway(cfg)
        asyncio.run(run_calls(gateway, ["warm-up"]))  # first-call set-up of LiteLLM, not throughput
        STATS.reset()
        cpu = time.process_time()
        wall = asyncio.run(run_calls(gateway, prompts))
        cpu = time.process_time() - cpu
        ideal = args.concurrency / args.latency
        rate = args.calls / wall
        print(f"sent:   {args.calls} calls in {wall:.2f} s = {rate:.1f} calls/s; ideal {ideal:.0f}/s; "
              f"fraction {rate / ideal:.3f}; CPU {cpu / args.calls * 1000:.2f} ms/call; "
              f"peak in flight {STATS.peak_in_flight}")
        STATS.reset()
        cached = Gateway(cfg)
        cpu = time.process_time()
        wall = asyncio.run(run_calls(cached, prompts))
        cpu = time.process_time() - cpu
        print(f"cached: {args.calls} calls in {wall:.3f} s = {args.calls / wall:,.0f} calls/s; "
              f"CPU {cpu / args.calls * 1000:.3f} ms/call; provider calls {STATS.completions}")


if __name__ == "__main__":
    main()
