"""Record a small real-model index run, for tests/test_recorded_replay.py (see README.md beside this file).

    ../shared/tools/local_model.sh /work/localmodel 8090     # the model's server (first start: ~10 minutes)
    python -m tests.data.recorded.record                      # index input/ with settings.yaml: ~10-30 minutes
    kill $(cat /work/localmodel/server.pid)

Indexes input/ with the standard method and settings.yaml in a scratch project (kept, its folder printed), then
writes the chat answers the run left in its answer cache to answers.jsonl (one JSON object a line: the cache key,
kind, the stage and step that asked, the answer's text and usage) and what the run did to run.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parent
ANSWERS = RECORDED / "answers.jsonl"
RUN = RECORDED / "run.json"


def make_project(root: Path) -> Path:
    """A project holding the recorded corpus (input/) and the recorded settings."""
    shutil.copytree(RECORDED / "input", root / "input", dirs_exist_ok=True)
    shutil.copyfile(RECORDED / "settings.yaml", root / "settings.yaml")
    return root


def read_answers(cache_file: Path) -> list[dict[str, Any]]:
    """The chat answers of an answer cache, in the order they were stored."""
    with sqlite3.connect(cache_file) as db:
        rows = db.execute("SELECT key, kind, value FROM answers WHERE kind = 'chat' ORDER BY created").fetchall()
    return [{"key": key, "kind": kind, **json.loads(value)} for key, kind, value in rows]


def load_answers(cache_dir: Path, answers: list[dict[str, Any]]) -> None:
    """Put recorded answers into the answer cache in `cache_dir`, as the gateway stored them."""
    from graphrag_lite.llm.cache import AnswerCache

    cache = AnswerCache(cache_dir)
    try:
        cache.put_many("chat", [(a["key"], {"text": a["text"], "usage": a["usage"]}) for a in answers])
    finally:
        cache.close()


def asking_stages() -> dict[str, tuple[str, str]]:
    """Note the stage and step that asked for each chat answer stored from now on (cache key -> them)."""
    from graphrag_lite.llm.cache import AnswerCache
    from graphrag_lite.llm.calls import CALL_STEP

    asked: dict[str, tuple[str, str]] = {}
    store = AnswerCache.put

    def put(self: AnswerCache, key: str, kind: str, value: Any) -> None:
        if kind == "chat":
            asked[key] = CALL_STEP.get()
        store(self, key, kind, value)

    AnswerCache.put = put  # type: ignore[method-assign]
    return asked


def record(root: Path) -> dict[str, Any]:
    from rich.console import Console

    from graphrag_lite.pipeline.runner import run_pipeline
    from graphrag_lite.pipeline.settings import configure
    from graphrag_lite.stages import STAGES

    config, pipeline = configure(STAGES, make_project(root))
    asked = asking_stages()
    started = time.monotonic()
    summary = run_pipeline(config, pipeline, Console())
    wall = round(time.monotonic() - started, 1)
    answers = [{"stage": asked.get(a["key"], ("", ""))[0], "step": asked.get(a["key"], ("", ""))[1], **a}
               for a in read_answers(config.cache.base_dir / "llm_cache.sqlite")]
    ANSWERS.write_text("".join(json.dumps(a, ensure_ascii=False) + "\n" for a in answers), encoding="utf-8")
    stats = json.loads((config.output.base_dir / "stats.json").read_text(encoding="utf-8"))
    return {"recorded": datetime.now(UTC).isoformat(timespec="seconds"), "status": summary.status,
            "model": config.models["default_chat_model"].model, "server": server_model(),
            "wall_s": wall, "answers": len(answers), "llm": stats["llm"],
            "stages": {name: {"summary": s.get("summary"), "problems": s.get("problems"), "llm": s.get("llm")}
                       for name, s in stats["stages"].items()}}


def server_model() -> Any:
    """What the server in settings.yaml says it serves (its /models), or exit when it is not running."""
    import yaml

    settings = yaml.safe_load((RECORDED / "settings.yaml").read_text(encoding="utf-8"))
    api_base = settings["models"]["default_chat_model"]["api_base"]
    try:
        with urllib.request.urlopen(f"{api_base}/models", timeout=10) as response:
            return json.loads(response.read())["data"]
    except OSError as err:
        raise SystemExit(f"the model's server does not answer ({err}); start ../shared/tools/local_model.sh") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="the scratch project's folder (default: a new temporary one)")
    args = parser.parse_args(argv)
    server_model()
    root = args.root or Path(tempfile.mkdtemp(prefix="recorded-run-"))
    print(f"project: {root}", flush=True)
    run = record(root)
    RUN.write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{run['answers']} answers in {ANSWERS}, the run in {RUN} ({run['status']}, {run['wall_s']} s)")
    return 0 if run["status"].startswith("completed") else 1


if __name__ == "__main__":
    sys.exit(main())
