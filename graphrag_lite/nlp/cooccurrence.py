"""Entities and relationships of the fast method: rule-based mentions, co-occurrence edges weighted by
normalized PMI, and pruning (rare entities, weak or one-off edges, the biggest hubs).

NPMI(a, b) = log(p(a, b) / (p(a) p(b))) / -log p(a, b) over windows (sentences or text units): 1 when two
entities always appear together, 0 when they co-occur by chance. An edge keeps its NPMI as the strength of
each window it appears in, so its merged weight grows with evidence.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations

import pandas as pd

from graphrag_lite.config import ExtractGraphNlpConfig
from graphrag_lite.nlp.extractor import capitalised_mid_sentence, extract_mentions, majority_type, sentences

ENTITY_COLUMNS = ["text_unit_id", "name", "type", "description"]
RELATIONSHIP_COLUMNS = ["text_unit_id", "source", "target", "description", "strength"]


@dataclass
class NlpGraph:
    entities: pd.DataFrame
    relationships: pd.DataFrame
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class _Reading:
    """What one pass over the text units found. Windows are counted as they are read (the names each is in,
    the pairs of names each holds), and kept only with two names or more (only those give relationships):
    (text unit id, text, names). Each (text unit, name) is a row of `mentioned`, described by the sentence the
    name is first found in there."""

    total_windows: int = 0
    name_windows: Counter[str] = field(default_factory=Counter)
    pair_windows: Counter[tuple[str, str]] = field(default_factory=Counter)
    windows: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    kinds: dict[str, Counter[str]] = field(default_factory=dict)  # the types each name was given
    frequency: Counter[str] = field(default_factory=Counter)  # text units mentioning each name
    mentioned: dict[str, list[str]] = field(default_factory=lambda: {"text_unit_id": [], "name": [],
                                                                      "description": []})

    def add_window(self, unit_id: str, text: str, names: tuple[str, ...]) -> None:
        present = sorted(set(names))
        self.name_windows.update(present)
        self.pair_windows.update(combinations(present, 2))
        if len(names) > 1:
            self.windows.append((unit_id, text, names))


def npmi(pair: int, a: int, b: int, windows: int) -> float:
    if pair == 0:
        return -1.0
    if pair == windows:
        return 1.0
    return math.log(pair * windows / (a * b)) / -math.log(pair / windows)


def extract_nlp_graph(units: pd.DataFrame, cfg: ExtractGraphNlpConfig,
                      advance: Callable[[], None] = lambda: None) -> NlpGraph:
    """`advance` is called once per text unit read (a progress bar). Linear in the text: each name's type is
    voted once, each sentence clipped once a text unit, and windows counted as they are read."""
    found = _read_units(units, capitalised_mid_sentence(units["text"]), cfg.window, advance)
    kept = {name for name, n in found.frequency.items() if n >= cfg.min_entity_frequency}
    pair_windows = {pair: n for pair, n in found.pair_windows.items() if pair[0] in kept and pair[1] in kept}
    edges = {pair: npmi(n, found.name_windows[pair[0]], found.name_windows[pair[1]], found.total_windows)
             for pair, n in pair_windows.items() if n >= cfg.min_cooccurrence}
    edges = {pair: score for pair, score in edges.items() if score >= cfg.min_npmi}
    hubs = _hubs(edges, cfg.remove_top_hubs)
    kept -= hubs
    edges = {pair: score for pair, score in edges.items() if not set(pair) & hubs}
    counts = {"names_found": len(found.frequency), "entities_kept": len(kept), "rare_entities_pruned":
              len(found.frequency) - len(kept) - len(hubs), "hubs_removed": len(hubs),
              "windows": found.total_windows, "co_occurring_pairs": len(pair_windows), "edges_kept": len(edges)}
    return NlpGraph(_entity_table(found, kept), _relationship_table(found.windows, kept, edges), counts)


def _read_units(units: pd.DataFrame, known: set[str], window: str, advance: Callable[[], None]) -> _Reading:
    found = _Reading()
    spelled: dict[str, str] = {}  # one string for each name, however often it is found
    for unit_id, text in zip(units["id"], units["text"], strict=True):
        unit_sentences = sentences(text)
        by_sentence: dict[int, dict[str, None]] = {}  # the names of each sentence, each once, in order
        first: dict[str, int] = {}  # the sentence each name is first found in
        for mention in extract_mentions(text, known, unit_sentences):
            name = spelled.setdefault(mention.name, mention.name)
            found.kinds.setdefault(name, Counter())[mention.type] += 1
            by_sentence.setdefault(mention.sentence, {})[name] = None
            first.setdefault(name, mention.sentence)
        _add_mentions(found, unit_id, unit_sentences, first)
        if window == "text_unit":
            found.total_windows += 1
            names = tuple(dict.fromkeys(n for in_sentence in by_sentence.values() for n in in_sentence))
            found.add_window(unit_id, text, names)
        else:
            found.total_windows += len(unit_sentences)
            for i, in_sentence in sorted(by_sentence.items()):
                found.add_window(unit_id, unit_sentences[i], tuple(in_sentence))
        advance()
    return found


def _add_mentions(found: _Reading, unit_id: str, unit_sentences: list[str], first: dict[str, int]) -> None:
    """A row a name of the text unit, described by the sentence it is first found in (clipped once)."""
    clipped: dict[int, str] = {}
    for name, sentence in first.items():
        found.frequency[name] += 1
        found.mentioned["text_unit_id"].append(unit_id)
        found.mentioned["name"].append(name)
        found.mentioned["description"].append(clipped.get(sentence) or
                                              clipped.setdefault(sentence, _clip(unit_sentences[sentence])))


def _entity_table(found: _Reading, kept: set[str]) -> pd.DataFrame:
    """The rows of the kept names, each with the name's type (voted once)."""
    types = {name: majority_type(found.kinds[name]) for name in kept}
    rows = [i for i, name in enumerate(found.mentioned["name"]) if name in kept]
    columns = {column: [values[i] for i in rows] for column, values in found.mentioned.items()}
    columns["type"] = [types[found.mentioned["name"][i]] for i in rows]
    found.mentioned.clear()
    return pd.DataFrame(columns, columns=ENTITY_COLUMNS)


def _relationship_table(windows: list[tuple[str, str, tuple[str, ...]]], kept: set[str],
                        edges: dict[tuple[str, str], float]) -> pd.DataFrame:
    """One row a (text unit, pair of names with an edge), described by the first window they share there."""
    rows: list[tuple[str, str, str, str, float]] = []
    seen: set[tuple[str, str, str]] = set()
    for unit_id, text, names in windows:
        clipped = ""
        for a, b in combinations(sorted(set(names) & kept), 2):
            if (a, b) in edges and (unit_id, a, b) not in seen:
                seen.add((unit_id, a, b))
                clipped = clipped or _clip(text)
                rows.append((unit_id, a, b, f"{a.title()} and {b.title()} are mentioned together: {clipped}",
                             round(edges[(a, b)], 4)))
    return pd.DataFrame(rows, columns=RELATIONSHIP_COLUMNS)


def _hubs(edges: dict[tuple[str, str], float], count: int) -> set[str]:
    degree = Counter(name for pair in edges for name in pair)
    return {name for name, _ in degree.most_common(count)} if count else set()


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
