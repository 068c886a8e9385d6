"""Question sets: JSONL, JSON or CSV files of questions, with optional answers and gold evidence.

One record per question. Only `question` is required; other fields are ignored, so existing benchmark
files load as they are once their gold is named the way this reader expects:

    question             the question
    id                   optional; default q1, q2, ... by position
    answer / answers     a string or a list (all are accepted answers); answer_aliases adds more
    evidence             sentences of the text that answer it (matched fuzzily: paraphrase is tolerated)
    evidence_documents   document ids or titles
    evidence_text_units  text unit ids (the `id` or `human_readable_id` of text_units)
    group                a label to break scores down by (hop count, question type); also question_type, type

In CSV, a list is a JSON list in its cell (`["a", "b"]`); anything else is one item.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from graphrag_lite.errors import ConfigError
from graphrag_lite.ids import json_digest

LIST_FIELDS = {"answers": ("answer", "answers", "answer_aliases"), "evidence": ("evidence",),
               "evidence_documents": ("evidence_documents",), "evidence_text_units": ("evidence_text_units",)}
GROUP_FIELDS = ("group", "question_type", "type")


class QuestionFileError(ConfigError):
    """A question file that cannot be read as questions."""


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    evidence_documents: tuple[str, ...] = ()
    evidence_text_units: tuple[str, ...] = ()
    group: str = ""

    @property
    def has_gold(self) -> bool:
        return bool(self.evidence or self.evidence_documents or self.evidence_text_units)


def load_questions(path: Path) -> list[Question]:
    """The questions of a file, or a QuestionFileError naming the file and the entry that is wrong."""
    if not path.is_file():
        raise QuestionFileError(f"question file {path} not found")
    records = _records(path)
    if not records:
        raise QuestionFileError(f"{path}: no questions in the file")
    questions = [_question(record, path, where) for where, record in records]
    seen: dict[str, str] = {}
    for (where, _), question in zip(records, questions, strict=True):
        if question.id in seen:
            raise QuestionFileError(f"{path}: {where}: id {question.id!r} is used twice (also at {seen[question.id]})")
        seen[question.id] = where
    return questions


def questions_digest(questions: list[Question]) -> str:
    """Changes whenever a question, an answer or a gold item changes (results computed for other questions
    are not reused)."""
    return json_digest([q.__dict__ for q in questions], 12)


def _records(path: Path) -> list[tuple[str, Any]]:
    """(where, record) pairs; `where` names the entry in messages (line 3, entry 3, row 3)."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
        return [(f"row {i + 2}", {k: _csv_cell(v) for k, v in row.items()})
                for i, row in enumerate(table.to_dict("records"))]
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise QuestionFileError(f"{path}: not UTF-8 text (byte {err.start}); save it as UTF-8") from None
    if suffix == ".jsonl":
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append((f"line {number}", json.loads(line)))
                except json.JSONDecodeError as err:
                    raise QuestionFileError(f"{path}: line {number}: not valid JSON ({err.msg})") from None
                except RecursionError:
                    raise QuestionFileError(f"{path}: line {number}: nested too deeply to be a question") from None
        return records
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise QuestionFileError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
        except RecursionError:
            raise QuestionFileError(f"{path}: nested too deeply to be a question file") from None
        data = data.get("questions", data) if isinstance(data, dict) else data
        if not isinstance(data, list):
            raise QuestionFileError(f"{path}: expected a list of questions (or {{\"questions\": [...]}})")
        return [(f"entry {i + 1}", record) for i, record in enumerate(data)]
    raise QuestionFileError(f"{path}: a question file must end in .jsonl, .json or .csv")


def _csv_cell(value: str) -> Any:
    if value.strip().startswith("["):
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(value)
    return value


def _question(record: Any, path: Path, where: str) -> Question:
    if not isinstance(record, dict):
        raise QuestionFileError(f"{path}: {where}: expected an object with a 'question' field, got "
                                f"{type(record).__name__}")
    text = record.get("question")
    if not isinstance(text, str) or not text.strip():
        fields = ", ".join(map(str, record)) or "none"
        raise QuestionFileError(f"{path}: {where}: no 'question' field with text (its fields: {fields}); every "
                                "question needs one")
    lists = {name: tuple(item for field in fields for item in _items(record.get(field), path, where, field))
             for name, fields in LIST_FIELDS.items()}
    group = next((str(record[f]) for f in GROUP_FIELDS if record.get(f) not in (None, "")), "")
    ident = record.get("id")
    return Question(id=str(ident) if ident not in (None, "") else f"q{where.split()[-1]}", question=text.strip(),
                    group=group, **lists)


def _items(value: Any, path: Path, where: str, field: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str | int | float):
        return [str(value)]
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return [str(v) for v in value if str(v).strip()]
    raise QuestionFileError(f"{path}: {where}: '{field}' must be a string or a list of strings")
