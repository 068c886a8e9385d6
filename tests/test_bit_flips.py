"""200 seeded random single-bit flips across the files of an index: none gives a silent wrong answer. After
each flip a query (local, global or basic, in turn) either answers exactly as before or is refused with a
message; a sample of flips is repaired by `graphrag-lite index` instead, after which every query answers as
before and `graphrag-lite check` finds the index intact."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from tests.conftest import DATA, make_project

UNRELATED = sorted((DATA / "unrelated-documents").glob("*.txt"))
FLIPS = 200
REPAIRED = 5  # of the flips, those repaired by `index` (in a copy) instead of undone
QUESTIONS = [("local", "Whom did Dr. Elena Vargas hire in Ollantaytambo?"),
             ("global", "What are the main themes?"), ("basic", "Who won the Reykjavik Open?")]


def ask(root: Path, method: str, question: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["query", method, question, "--json", "--no-model", "--root", str(root)])
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


def answer(output: str) -> dict:
    found = json.loads(output)
    return {key: found[key] for key in ("answer", "context")}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("flips") / "p", UNRELATED[:3])
    assert CliRunner().invoke(app, ["index", "--root", str(root)]).exit_code == 0
    return root


def index_files(root: Path) -> list[Path]:
    """Every file of the output folder, once (the tables beside tables/ are links to the same files)."""
    seen, files = set(), []
    for path in sorted((root / "output").rglob("*")):
        if path.is_file() and not path.is_symlink() and (key := path.stat().st_ino) not in seen:
            seen.add(key)
            files.append(path)
    return files


def test_two_hundred_bit_flips_give_no_silent_wrong_answer(built: Path, tmp_path: Path):
    before = {}
    for method, question in QUESTIONS:
        code, output = ask(built, method, question)
        assert code == 0, output
        before[method] = answer(output)
    chance = random.Random(36)
    files = index_files(built)
    outcomes = {"same answer": 0, "refused": 0, "repaired": 0}
    wrong = []
    for flip in range(FLIPS):
        path = chance.choice(files)
        data = path.read_bytes()
        if not data:
            continue
        offset, bit = chance.randrange(len(data)), chance.randrange(8)
        damaged = bytearray(data)
        damaged[offset] ^= 1 << bit
        method, question = QUESTIONS[flip % len(QUESTIONS)]
        if flip % (FLIPS // REPAIRED) == 0:
            outcomes["repaired"] += _repaired(built, tmp_path / f"repair{flip}", path, bytes(damaged), before)
            continue
        path.write_bytes(bytes(damaged))
        try:
            code, output = ask(built, method, question)
        finally:
            path.write_bytes(data)
        if code != 0:
            assert output.startswith("error:"), output
            outcomes["refused"] += 1
        elif answer(output) == before[method]:
            outcomes["same answer"] += 1
        else:
            wrong.append(f"{path.relative_to(built)} byte {offset} bit {bit}: {method} answered otherwise")
    print(outcomes)
    assert not wrong, wrong
    assert outcomes["refused"] > 0


def _repaired(built: Path, copy: Path, path: Path, damaged: bytes, before: dict[str, dict]) -> int:
    """The flip made in a copy of the project, then `index` run there: afterwards every query answers as
    before and `check` finds the index intact."""
    shutil.copytree(built, copy, symlinks=True)
    target = copy / path.relative_to(built)
    os.unlink(target)  # a link shared with another file of the copy would carry the flip twice
    target.write_bytes(damaged)
    result = CliRunner().invoke(app, ["index", "--root", str(copy)])
    assert result.exit_code == 0, result.output
    for method, question in QUESTIONS:
        code, output = ask(copy, method, question)
        assert code == 0 and answer(output) == before[method], (path, method, output)
    checked = CliRunner().invoke(app, ["check", "--root", str(copy)])
    assert checked.exit_code == 0, checked.output
    return 1
