"""A user's corrections to entity resolution: a CSV of name pairs to always merge or never merge.

    alias,title,action
    Holmes,Sherlock Holmes,merge
    Kent,Earldom of Kent,never

`merge` puts `alias` in the node of `title`; `never` keeps the two apart whatever the rules decide, even two
names that normalize alike ("Kessler,Mr. Kessler,never": Mr. Kessler gets a node of his own). Names are
matched as entity resolution matches them (case, punctuation, articles and a man's honorific aside: "Mr.
Holmes" is Holmes, "Mrs. Bennet" stays Mrs. Bennet). Other columns
(such as the `reason` that `graphrag-lite aliases --csv` writes) are ignored, so a listing of the merges can
be edited into overrides.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from graphrag_lite.errors import ConfigError
from graphrag_lite.names import literal_name, normalize_name

ACTIONS = ("merge", "never")
NORMALIZED = "same name after normalization"  # the reason merge.py gives names that normalize alike


@dataclass(frozen=True)
class AliasOverrides:
    merge: dict[str, str] = field(default_factory=dict)  # normalized alias -> normalized name it merges into
    never: frozenset[frozenset[str]] = frozenset()  # pairs of normalized names kept apart
    spelled: dict[str, str] = field(default_factory=dict)  # normalized name -> as the file spells it
    reasons: dict[str, str] = field(default_factory=dict)  # alias -> why, for merges not from the file
    # spellings (literal_name) a `never` line keeps apart from a name they normalize like ("Mr. Kessler" from
    # "Kessler"): each is grouped under its own spelling
    separate: frozenset[str] = frozenset()

    def key(self, name: str) -> str:
        """The grouping key of a name: its normalized form, or its own spelling when a line separates it."""
        literal = literal_name(name)
        return literal if literal in self.separate else normalize_name(name)

    def with_merges(self, merges: dict[str, str], reason: str) -> AliasOverrides:
        """These and `merges` (titles: alias -> the name it merges into); the file's own lines win."""
        added = {self.key(a): self.key(t) for a, t in merges.items()}
        added = {a: t for a, t in added.items() if a not in self.merge}
        spelled = {**{key: key for key in [*added, *added.values()]}, **self.spelled}
        return AliasOverrides({**self.merge, **added}, self.never, spelled,
                              {**self.reasons, **dict.fromkeys(added, reason)}, self.separate)


def read_alias_overrides(path: Path) -> AliasOverrides:
    """The overrides file, or a ConfigError naming the file, line and what to change."""
    rows = _rows(path)
    separate = frozenset(_separated(path, rows))
    merge: dict[str, str] = {}
    never: set[frozenset[str]] = set()
    spelled: dict[str, str] = {}
    for line, row in rows:
        alias, title = (AliasOverrides(separate=separate).key(row[c]) for c in ("alias", "title"))
        _check_row(path, line, row, alias, title)
        if row["action"] == "merge" and merge.get(alias, title) != title:
            raise ConfigError(f"{path}, line {line}: {row['alias']!r} is already merged into "
                              f"{spelled[merge[alias]]!r} on an earlier line; a name merges into one other")
        spelled.update({alias: row["alias"], title: row["title"]})
        if row["action"] == "merge":
            merge[alias] = title
        else:
            never.add(frozenset((alias, title)))
    contradicted = [pair for pair in never if any(frozenset((a, t)) == pair for a, t in merge.items())]
    if contradicted:
        a, b = sorted(contradicted[0])
        raise ConfigError(f"{path}: {spelled[a]!r} and {spelled[b]!r} are both merged and kept apart; keep one line")
    _check_no_loop(path, merge, spelled)
    return AliasOverrides(merge, frozenset(never), spelled, separate=separate)


def _separated(path: Path, rows: list[tuple[int, dict[str, str]]]) -> set[str]:
    """The spellings `never` lines keep apart from a name they normalize like: the one(s) whose own spelling
    differs from the shared normalized form ("MR KESSLER", not "KESSLER")."""
    found: set[str] = set()
    for line, row in rows:
        names = [row.get("alias", ""), row.get("title", "")]
        if row["action"] != "never" or normalize_name(names[0]) != normalize_name(names[1]) or not all(names):
            continue
        literals = [literal_name(n) for n in names]
        if literals[0] == literals[1]:
            raise ConfigError(f"{path}, line {line}: {names[0]!r} and {names[1]!r} differ only in case, spacing or "
                              "punctuation, so they cannot be told apart; remove the line")
        found.update(lit for lit, n in zip(literals, names, strict=True) if lit != normalize_name(n))
    return found


def _rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) for each non-empty line; headers match whatever their case and spacing."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = [h.strip().lower() for h in next(reader, [])]
            rows = [(reader.line_num, line) for line in reader]
    except OSError as err:
        raise ConfigError(f"entity_resolution.overrides: {path} cannot be read: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; save it as CSV UTF-8") from None
    missing = [c for c in ("alias", "title", "action") if c not in header]
    if missing:
        found = f"found {', '.join(repr(h) for h in header)}" if header else "the file is empty"
        hint = "; columns are separated by commas" if len(header) == 1 and ";" in header[0] else ""
        raise ConfigError(f"{path}: no {', '.join(missing)} column ({found}{hint}); the first line must name the "
                          "columns alias,title,action")
    named = [(line, {h: " ".join(v.split()) for h, v in zip(header, values, strict=False)}) for line, values in rows]
    return [(line, {**row, "action": row.get("action", "").lower()}) for line, row in named
            if any(row.get(c) for c in ("alias", "title", "action"))]


def _check_row(path: Path, line: int, row: dict[str, str], alias: str, title: str) -> None:
    where = f"{path}, line {line}"
    if not alias or not title:
        raise ConfigError(f"{where}: needs a name in both alias and title (got {row.get('alias')!r} and "
                          f"{row.get('title')!r})")
    if alias == title:
        raise ConfigError(f"{where}: {row['alias']!r} and {row['title']!r} are one name once case, punctuation, "
                          "articles and a man's honorific are set aside, so they are one entity already; remove the "
                          "line (a `never` line between them would keep them apart)")
    if row["action"] not in ACTIONS:
        raise ConfigError(f"{where}: action {row['action']!r} is not one of {', '.join(ACTIONS)}")


def _check_no_loop(path: Path, merge: dict[str, str], spelled: dict[str, str]) -> None:
    for start in merge:
        chain, name = [start], merge[start]
        while name in merge and name not in chain:
            chain.append(name)
            name = merge[name]
        if name in chain:
            loop = " -> ".join(spelled[k] for k in [*chain[chain.index(name):], name])
            raise ConfigError(f"{path}: the merges go round in a loop ({loop}); remove one of those lines")


def write_alias_overrides(aliases: pd.DataFrame, path: Path) -> tuple[int, int]:
    """Merges (rows of entity_aliases) as an overrides file that keeps them, ready to be edited: one line per
    name as entity resolution matches names ("DR WATSON" and "WATSON" are one), none for names that only
    normalize alike (they cannot be kept apart). An existing file keeps its lines (a `never` stays `never`);
    only names it does not have are added. Returns (lines added, lines kept)."""
    rows = aliases[aliases["reason"] != NORMALIZED].assign(action="merge")[["alias", "title", "action", "reason"]]
    rows = rows[~rows["alias"].map(normalize_name).duplicated()]
    existing = pd.DataFrame(columns=rows.columns)
    try:
        if path.exists():
            existing = pd.read_csv(path, dtype=str, keep_default_na=False)
            have = {normalize_name(a) for a in existing.get("alias", [])}
            rows = rows[~rows["alias"].map(normalize_name).isin(have)]
        pd.concat([existing, rows], ignore_index=True).to_csv(path, index=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise ConfigError(f"--csv {path}: cannot add to it ({getattr(err, 'strerror', None) or err})") from None
    return len(rows), len(existing)
