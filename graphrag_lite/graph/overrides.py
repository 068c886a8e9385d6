"""A user's corrections to entity resolution: a CSV of name pairs to always merge or never merge.

    alias,title,action
    Holmes,Sherlock Holmes,merge
    Kent,Earldom of Kent,never

`merge` puts `alias` in the node of `title`; `never` keeps the two apart whatever the rules decide. Names are
matched as entity resolution matches them (case, punctuation, articles and honorifics aside). Other columns
(such as the `reason` that `graphrag-lite aliases --csv` writes) are ignored, so a listing of the merges can
be edited into overrides.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from graphrag_lite.errors import ConfigError
from graphrag_lite.graph.resolution import normalize_name

ACTIONS = ("merge", "never")
NORMALIZED = "same name after normalization"  # the reason merge.py gives names that normalize alike


@dataclass(frozen=True)
class AliasOverrides:
    merge: dict[str, str] = field(default_factory=dict)  # normalized alias -> normalized name it merges into
    never: frozenset[frozenset[str]] = frozenset()  # pairs of normalized names kept apart
    spelled: dict[str, str] = field(default_factory=dict)  # normalized name -> as the file spells it
    reasons: dict[str, str] = field(default_factory=dict)  # alias -> why, for merges not from the file

    def with_merges(self, merges: dict[str, str], reason: str) -> AliasOverrides:
        """These and `merges` (titles: alias -> the name it merges into); the file's own lines win."""
        added = {normalize_name(a): normalize_name(t) for a, t in merges.items()}
        added = {a: t for a, t in added.items() if a not in self.merge}
        spelled = {**{key: key for key in [*added, *added.values()]}, **self.spelled}
        return AliasOverrides({**self.merge, **added}, self.never, spelled,
                              {**self.reasons, **dict.fromkeys(added, reason)})


def read_alias_overrides(path: Path) -> AliasOverrides:
    """The overrides file, or a ConfigError naming the file, line and what to change."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            rows, columns = list(reader), set(reader.fieldnames or [])
    except OSError as err:
        raise ConfigError(f"entity_resolution.overrides: {path} cannot be read: {err.strerror or err}") from None
    missing = {"alias", "title", "action"} - columns
    if missing:
        raise ConfigError(f"{path}: no {', '.join(sorted(missing))} column; the first line must name the columns "
                          "alias,title,action") from None
    merge: dict[str, str] = {}
    never: set[frozenset[str]] = set()
    spelled: dict[str, str] = {}
    for line, row in enumerate(rows, start=2):
        alias, title = normalize_name(row["alias"] or ""), normalize_name(row["title"] or "")
        action = (row["action"] or "").strip().lower()
        where = f"{path}, line {line}"
        if not alias or not title:
            raise ConfigError(f"{where}: needs a name in both alias and title (got {row['alias']!r} and "
                              f"{row['title']!r})")
        if alias == title:
            raise ConfigError(f"{where}: {row['alias']!r} and {row['title']!r} are one name once case, punctuation, "
                              "articles and honorifics are set aside, so they are always one entity; remove the line")
        if action not in ACTIONS:
            raise ConfigError(f"{where}: action {row['action']!r} is not one of {', '.join(ACTIONS)}")
        if action == "merge" and merge.get(alias, title) != title:
            raise ConfigError(f"{where}: {row['alias']!r} is already merged into {spelled[merge[alias]]!r} "
                              "on an earlier line; a name merges into one other")
        spelled.update({alias: " ".join(row["alias"].split()), title: " ".join(row["title"].split())})
        if action == "merge":
            merge[alias] = title
        else:
            never.add(frozenset((alias, title)))
    contradicted = [pair for pair in never if any(frozenset((a, t)) == pair for a, t in merge.items())]
    if contradicted:
        a, b = sorted(contradicted[0])
        raise ConfigError(f"{path}: {spelled[a]!r} and {spelled[b]!r} are both merged and kept apart; keep one line")
    return AliasOverrides(merge, frozenset(never), spelled)


def write_alias_overrides(aliases: pd.DataFrame, path: Path) -> None:
    """Merges (rows of entity_aliases) as an overrides file that keeps them, ready to be edited: one line per
    name as entity resolution matches names ("DR WATSON" and "WATSON" are one), none for names that only
    normalize alike (they cannot be kept apart)."""
    rows = aliases[aliases["reason"] != NORMALIZED].assign(action="merge")[["alias", "title", "action", "reason"]]
    rows = rows[~rows["alias"].map(normalize_name).duplicated()]
    rows.to_csv(path, index=False)
