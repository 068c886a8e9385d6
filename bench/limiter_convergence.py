"""Benchmark: does the concurrency limit converge to what the provider serves, and stay up under random 429s?

    .venv/bin/python bench/limiter_convergence.py [--calls 400] [--latency 0.2]

1. A provider that serves 10 calls at once (more are refused with 429 at once): concurrency 25 (adaptive)
   against the best fixed setting, 10. Goal: wall time within 10% of the fixed setting.
2. A provider that refuses 7% of calls at random with 429 (part of 20% mixed faults) and serves any number:
   the limit should stay near 25, not collapse (before: peak 9 of 25).
Prints wall time, 429s, and the limit the run ended with.
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


def run(model: str, concurrency: int, calls: int) -> tuple[float, int, int, int]:
    with tempfile.TemporaryDirectory() as folder:
        config = GraphRagConfig(models={"m": ModelConfig(model=model, concurrency=concurrency, max_retries=100,
                                                         max_retry_wait=1.0)},
                                cache=CacheConfig(enabled=False, base_dir=Path(folder)))
        gateway = Gateway(config, use_cache=False)

        async def go() -> int:
            await asyncio.gather(*(gateway.chat("m", [{"role": "user", "content": f"question {i}"}], stage="b",
                                                step="answer") for i in range(calls)))
            return gateway.limiter("m").concurrency.limit

        STATS.reset()
        started = time.perf_counter()
        limit = asyncio.run(go())
        return time.perf_counter() - started, STATS.refused, limit, STATS.peak_in_flight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    capped = f"fake/default?capacity=10&latency={args.latency}"
    ideal = args.calls / 10 * args.latency
    print(f"provider serving 10 at once, {args.calls} calls of {args.latency} s (ideal {ideal:.1f} s):")
    fixed, refused, limit, _ = run(capped, 10, args.calls)
    print(f"  fixed concurrency 10:     {fixed:5.1f} s, {refused:4d} 429s")
    adaptive, refused, limit, _ = run(capped, 25, args.calls)
    print(f"  adaptive from 25:         {adaptive:5.1f} s, {refused:4d} 429s, ended at limit {limit} "
          f"({adaptive / fixed:.2f} x the fixed setting)")
    mixed = f"fake/default?rate_limit=0.07&retry_after=0.05&server_error=0.07&drop=0.06&latency={args.latency}&seed=3"
    wall, refused, limit, peak = run(mixed, 25, args.calls)
    print(f"random faults (7% 429, 7% 500, 6% dropped), concurrency 25: {wall:5.1f} s, {refused} 429s, "
          f"peak in flight {peak}, ended at limit {limit} (ideal {args.calls / 25 * args.latency / 0.8:.1f} s "
          "with 20% of calls retried)")


if __name__ == "__main__":
    main()
