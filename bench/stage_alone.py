"""Benchmark: stages of a finished run run again, each alone in a fresh process, on the tables that run left: wall
time and peak memory. What a stage needs itself, apart from what earlier stages of a run leave allocated (a
stage's peak_rss_mb in stats.json includes that).

    .venv/bin/python bench/stage_alone.py ROOT STAGE [STAGE ...]

ROOT is a project whose output folder holds a finished run (e.g. DIR/text after `bench/large_input.py --keep DIR`);
its settings under the fast method's are used, and the run's tables in GraphRAG's layout (output/*.parquet) are
read. The stage's tables are not written. "start" is the process's memory before the stage (imports done), "peak"
its high-water mark while the stage reads its tables and runs. To measure another commit's code, run this from
a clone of it with PYTHONPATH=<the clone's folder>.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def memory_mb() -> dict[str, float]:
    status = Path("/proc/self/status").read_text()
    return {key: int(line.split()[1]) / 1024 for line in status.splitlines()
            for key in ("VmRSS", "VmHWM") if line.startswith(f"{key}:")}


def run_alone(root: Path, name: str) -> dict:
    """Run one stage in this process; its figures."""
    from rich.progress import Progress

    from graphrag_lite.pipeline.contract import StageContext
    from graphrag_lite.pipeline.model_access import ModelAccess
    from graphrag_lite.pipeline.settings import configure
    from graphrag_lite.stages import STAGES
    from graphrag_lite.storage import OutputStore

    config, _ = configure(STAGES, root, method="fast")
    stage = STAGES[name]
    models = ModelAccess(config, use_cache=False)
    context = StageContext(config=config, store=OutputStore(config.output.base_dir), progress=Progress(disable=True),
                           stage=stage, models=models)
    start = memory_mb()["VmRSS"]
    Path("/proc/self/clear_refs").write_text("5")  # the high-water mark from here
    started = time.perf_counter()
    try:
        result = stage.run(context)
    finally:
        models.close()
    return {"stage": name, "wall_s": time.perf_counter() - started, "start_mb": start,
            "peak_mb": memory_mb()["VmHWM"], "summary": result.summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path)
    parser.add_argument("stages", nargs="+")
    parser.add_argument("--in-this-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_this_process:
        print(json.dumps(run_alone(args.root, args.stages[0])))
        return
    for name in args.stages:
        child = subprocess.run([sys.executable, __file__, str(args.root), name, "--in-this-process"],
                               capture_output=True, text=True, check=True)
        figures = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"{name:30} {figures['wall_s']:7.1f} s  start {figures['start_mb']:6.0f} MB  peak "
              f"{figures['peak_mb']:6.0f} MB  {figures['summary'][:80]}")


if __name__ == "__main__":
    main()
