"""What changed in the input since the last run: documents are known by content (their id, a hash of the text
or the id column) and by title (their path): added, changed, deleted and renamed; and the numbers
(human_readable_id) documents keep across runs."""

from __future__ import annotations

import pandas as pd

from graphrag_lite.config import InputConfig


def texts_if_ids_given(cfg: InputConfig) -> list[str]:
    """["text"] when documents may have ids from a column, which then do not change with their text."""
    return ["text"] if cfg.id_column or any(rule.id_column for rule in cfg.files or []) else []


def describe_changes(changes: dict[str, list[str]], shown: int = 3) -> str:
    """'1 added (a.txt), 0 changed, ...': the counts, and the first few titles of each kind."""
    return ", ".join(f"{len(names)} {kind}" + (f" ({', '.join(names[:shown])}{', ...' if len(names) > shown else ''})"
                                               if names else "") for kind, names in changes.items())


CHANGE_KINDS = ("added", "changed", "deleted", "renamed")


def document_numbers(previous: pd.DataFrame, current: pd.DataFrame) -> dict[str, int]:
    """The last run's numbers by document id, and an edited document's (new id, same title) by its title."""
    numbers = dict(zip(previous["id"], previous["human_readable_id"], strict=True))
    present = set(current["id"])
    gone = {title: number for doc_id, title, number in zip(previous["id"], previous["title"],
                                                           previous["human_readable_id"], strict=True)
            if doc_id not in present}
    for doc_id, title in zip(current["id"], current["title"], strict=True):
        if doc_id not in numbers and title in gone:
            numbers[doc_id] = gone.pop(title)  # once: two documents may share a title (a title column)
    return numbers


def document_changes(previous: pd.DataFrame | None, current: pd.DataFrame) -> dict[str, list[str]]:
    """What changed since the last run, documents being known by content (id, a hash) and by title (path):
    added, changed (a title whose content is new), deleted, renamed (a content under a new title); {} on a
    first run."""
    if previous is None:
        return {}
    old = dict(zip(previous["id"], previous["title"], strict=True))
    new = dict(zip(current["id"], current["title"], strict=True))
    old_titles, new_titles = set(old.values()), set(new.values())
    edited = set()  # ids from a column stay when the text changes: compare the texts (read only then)
    if "text" in previous:
        old_texts = dict(zip(previous["id"], previous["text"], strict=True))
        edited = {t for i, t, text in zip(current["id"], current["title"], current["text"], strict=True)
                  if i in old_texts and old_texts[i] != text}
    return {"added": sorted(t for i, t in new.items() if i not in old and t not in old_titles),
            "changed": sorted({t for i, t in new.items() if i not in old and t in old_titles} | edited),
            "deleted": sorted(t for i, t in old.items() if i not in new and t not in new_titles),
            "renamed": sorted(f"{old[i]} -> {t}" for i, t in new.items() if i in old and old[i] != t)}
