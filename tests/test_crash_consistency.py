"""kill -9 at 20 seeded random moments of an `update` (standard method, fake model). After each kill, `query
--json` answers from the previous commit or from the update's (never from a mix: every table it read is
checked against the digests of one of the two), or refuses with a message; the re-run then gives the tables
of an uninterrupted update.

Each command runs in a process forked from a fork server that has imported the package and LiteLLM once: a
new interpreter would spend most of its time importing them, and be killed there more often than in its work.
Not forked from this process: a test process that has opened LanceDB (another test, on the same worker) has
its runtime's threads, which do not survive a fork."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from graphrag_lite.cli import app
from tests.conftest import DATA, make_project

UNRELATED = sorted((DATA / "unrelated-documents").glob("*.txt"))
KILLS = 20
QUESTION = ["query", "local", "Whom did Dr. Elena Vargas hire in Ollantaytambo?", "--json", "--no-model"]
DATED = ("creation_date", "inputs_digest")  # the copy's file dates; what a report was written from


FORKS = multiprocessing.get_context("forkserver")
FORKS.set_forkserver_preload(["litellm", "graphrag_lite.cli", "graphrag_lite.stages", "tests.test_crash_consistency"])


def started(*args: str, out: Path | None = None) -> multiprocessing.process.BaseProcess:
    """`graphrag-lite ARGS` in a process forked by the fork server, started; its stdout goes to `out`."""
    process = FORKS.Process(target=_command, args=(args, out))
    process.start()
    return process


def finished(*args: str, out: Path | None = None) -> int:
    process = started(*args, out=out)
    process.join()
    assert process.exitcode is not None
    return process.exitcode


def _command(args: tuple[str, ...], out: Path | None) -> None:
    result = CliRunner().invoke(app, list(args))
    if out is not None:
        out.write_text(json.dumps({"code": result.exit_code, "stdout": result.stdout, "output": result.output}))
    os._exit(result.exit_code)  # no clean-up of the parent's state inherited by the fork


def committed(root: Path) -> dict[str, str]:
    return json.loads((root / "output" / "index.json").read_text(encoding="utf-8"))["tables"]


def tables(root: Path, digests: dict[str, str]) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(root / "output" / "tables" / f"{name}.{digest}.parquet")
            for name, digest in digests.items()}


def assert_same(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        dated = [c for c in DATED if c in a[name]]
        pd.testing.assert_frame_equal(a[name].drop(columns=dated), b[name].drop(columns=dated), obj=name)


def added(root: Path) -> Path:
    """The project with the update's documents added (copied with their dates, the same in every copy)."""
    for document in UNRELATED[2:3]:
        shutil.copy2(document, root / "input" / document.name)
    return root


def test_kill_9_at_twenty_random_moments_of_an_update(tmp_path: Path):
    base = make_project(tmp_path / "base", UNRELATED[:2])
    assert finished("index", "--root", str(base)) == 0
    before = committed(base)
    reference = added(_copy(base, tmp_path / "reference"))
    started_at = time.perf_counter()
    assert finished("update", "--root", str(reference)) == 0
    took = time.perf_counter() - started_at
    after = tables(reference, committed(reference))
    outcomes = {"answered from the previous commit": 0, "answered from the update": 0, "refused": 0}
    chance = random.Random(36)
    for kill in range(KILLS):
        root = added(_copy(base, tmp_path / f"kill{kill}"))
        update = started("update", "--root", str(root))
        update.join(timeout=chance.uniform(0.0, 1.0) * took)
        if update.is_alive():
            os.kill(update.pid, signal.SIGKILL)  # type: ignore[arg-type]
            update.join()
        outcomes[_query_after_the_kill(root, before, reference)] += 1
        assert finished("update", "--root", str(root)) == 0
        assert_same(tables(root, committed(root)), after)
    print(outcomes)
    assert outcomes["answered from the previous commit"] > 0


def _query_after_the_kill(root: Path, before: dict[str, str], reference: Path) -> str:
    """How the query after a kill went: answered from one version (checked) or refused with a message."""
    updated = committed(reference)
    finished(*QUESTION, "--root", str(root), out=root / "query.json")
    result = json.loads((root / "query.json").read_text())
    if result["code"] != 0:
        assert result["output"].strip().startswith("error:") and "graphrag-lite" in result["output"], result
        return "refused"
    read = json.loads(result["stdout"])["index"]["tables"]  # the digest of every table the query read, checked
    if read == before:
        return "answered from the previous commit"
    # else all of them of the update's commit, whose tables are those of the uninterrupted update
    assert read == committed(root), f"a mix of versions: {read}"
    assert_same(tables(root, read), tables(reference, updated))
    return "answered from the update"


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True, copy_function=shutil.copy2)
    return target
