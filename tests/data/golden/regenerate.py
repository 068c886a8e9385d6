"""Rebuild the golden intermediate tables in tests/data/golden/{fast,standard}/ (see README.md beside this file).

    python -m tests.data.golden.regenerate            # rebuild both methods, then `git diff --stat` shows what moved
    python -m tests.data.golden.regenerate --check    # rebuild in a scratch folder and list the tables that differ

Each method indexes Operation Dulce (tests/data/operation-dulce/dulce.txt, MIT) with the offline fake provider
(`fake/default` chat, `fake/embedding`) and default settings otherwise; the standard method has claims on. Every
table the pipeline writes is kept, with the stages' summaries, problems and details (stages.json). The tests in
tests/test_golden_stages.py build their settings with `project_config`, so the golden run and the tests agree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

GOLDEN = Path(__file__).resolve().parent
CORPUS = GOLDEN.parent / "operation-dulce" / "dulce.txt"
METHODS = ("fast", "standard")
# the input file's modification time is the document's creation_date: fixed, so rebuilds give the same table
CORPUS_MTIME = 1_704_067_200  # 2024-01-01T00:00:00Z
# `period` is the date a community was clustered or reported: fixed in the stored tables (the tests leave the
# column out), so a rebuild on another day gives the same files
FIXED_PERIOD = "2024-01-01"
FAKE_MODELS = ("models:\n  default_chat_model:\n    model: fake/default\n"
               "  default_embedding_model:\n    model: fake/embedding\n")
SETTINGS = {
    "fast": FAKE_MODELS,
    "standard": FAKE_MODELS + "extract_claims:\n  enabled: true\n",
}
RUN_FILES = ("stats.json", "settings.effective.yaml", "pipeline_state.json", "llm_spend.json",
             "embeddings_manifest.json")


def make_project(root: Path, method: str) -> Path:
    """A project folder holding the golden corpus and the golden settings of `method`."""
    (root / "input").mkdir(parents=True, exist_ok=True)
    document = root / "input" / CORPUS.name
    shutil.copyfile(CORPUS, document)
    os.utime(document, (CORPUS_MTIME, CORPUS_MTIME))
    (root / "settings.yaml").write_text(SETTINGS[method], encoding="utf-8")
    return root


def project_config(root: Path, method: str, overrides: dict[str, object] | None = None):
    """The settings a golden run of `method` uses (the pipeline's recommended settings included), under
    `overrides` (dotted keys), in a project made by `make_project` at `root`; with the pipeline."""
    from graphrag_lite.pipeline.settings import configure
    from graphrag_lite.stages import STAGES

    return configure(STAGES, make_project(root, method), overrides=overrides or {}, method=method)


def build(method: str, target: Path) -> None:
    """Index the golden corpus with `method` in a scratch project and keep its tables in `target`."""
    from rich.console import Console

    from graphrag_lite.pipeline.runner import run_pipeline

    with tempfile.TemporaryDirectory(prefix="golden-") as scratch:
        config, pipeline = project_config(Path(scratch) / "project", method)
        summary = run_pipeline(config, pipeline, Console(quiet=True), use_cache=False)
        if summary.status != "completed":
            raise SystemExit(f"the golden {method} run ended '{summary.status}'")
        output = config.output.base_dir
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for path in sorted(output.glob("*.parquet")):
            table = pd.read_parquet(path)
            if "period" in table.columns:
                table["period"] = FIXED_PERIOD
            table.to_parquet(target / path.name, index=False)
        stats = json.loads((output / "stats.json").read_text(encoding="utf-8"))
        (target / "stages.json").write_text(json.dumps(stage_records(stats), indent=2, ensure_ascii=False) + "\n",
                                            encoding="utf-8")


def stage_records(stats: dict) -> dict[str, dict]:
    """What each stage said (summary, problems, details), without timings, memory or model spending."""
    return {name: {key: stage.get(key) for key in ("summary", "problems", "details", "rows_in", "rows_out")}
            for name, stage in stats["stages"].items()}


def differing(built: Path, stored: Path) -> list[str]:
    """The files of `built` that are missing from `stored` or hold other data (tables compared by content)."""
    names = sorted({p.name for p in built.iterdir()} | {p.name for p in stored.glob("*") if p.is_file()})
    changed = []
    for name in names:
        new, old = built / name, stored / name
        if not new.is_file() or not old.is_file():
            changed.append(f"{name} ({'removed' if old.is_file() else 'new'})")
        elif name.endswith(".parquet"):
            if not pd.read_parquet(new).equals(pd.read_parquet(old)):
                changed.append(name)
        elif new.read_bytes() != old.read_bytes():
            changed.append(name)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="rebuild in a scratch folder; list what differs")
    parser.add_argument("methods", nargs="*", choices=[*METHODS, []], help="fast, standard (default: both)")
    args = parser.parse_args(argv)
    status = 0
    for method in args.methods or METHODS:
        if args.check:
            with tempfile.TemporaryDirectory(prefix="golden-check-") as scratch:
                build(method, Path(scratch) / method)
                changed = differing(Path(scratch) / method, GOLDEN / method)
            print(f"{method}: " + (", ".join(changed) if changed else "as stored"))
            status |= bool(changed)
        else:
            build(method, GOLDEN / method)
            print(f"{method}: written to {GOLDEN / method}")
    return status


if __name__ == "__main__":
    sys.exit(main())
