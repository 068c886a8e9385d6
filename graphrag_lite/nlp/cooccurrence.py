"""Entities and relationships of the fast method: rule-based mentions, co-occurrence edges weighted by
normalized PMI, and pruning (rare entities, weak or one-off edges, the biggest hubs).

NPMI(a, b) = log(p(a, b) / (p(a) p(b))) / -log p(a, b) over windows (sentences or text units): 1 when two
entities always appear together, 0 when they co-occur by chance. An edge keeps its NPMI as the strength of
each window it appears in, so its merged weight grows with evidence.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd

from graphrag_lite.config import ExtractGraphNlpConfig
from graphrag_lite.nlp.extractor import capitalised_mid_sentence, extract_mentions, majority_type, sentences
from graphrag_lite.nlp.text_column import TextColumn

ENTITY_COLUMNS = ["text_unit_id", "name", "type", "description"]
RELATIONSHIP_COLUMNS = ["text_unit_id", "source", "target", "description", "strength"]


@dataclass
class NlpGraph:
    entities: pd.DataFrame
    relationships: pd.DataFrame
    counts: dict[str, int] = field(default_factory=dict)


class _Reading:
    """What one pass over the text units found, as integers and Arrow text where it is large. Windows are counted
    as they are read (the names each is in, the pairs of names each holds), and kept only with two names or more
    (only those give relationships): their text unit's row, their names' numbers and their text, clipped. Each
    (text unit, name) is a mention, described by the sentence the name is first found in there."""

    def __init__(self) -> None:
        self.total_windows = 0
        self.name_windows: Counter[str] = Counter()
        self.pair_windows: Counter[tuple[str, str]] = Counter()
        self.names: list[str] = []  # each name found, once, numbered by its place here
        self.number: dict[str, int] = {}
        self.window_unit, self.window_sizes, self.window_names = array("q"), array("q"), array("q")
        self.window_text = TextColumn()
        self.kinds: dict[str, Counter[str]] = {}  # the types each name was given
        self.frequency: Counter[str] = Counter()  # text units mentioning each name
        self.mention_unit, self.mention_name = array("q"), array("q")
        self.mention_description = TextColumn()

    def name(self, spelled: str) -> str:
        """The one string of a name, however often it is found (numbered the first time)."""
        if spelled not in self.number:
            self.number[spelled] = len(self.names)
            self.names.append(spelled)
        return self.names[self.number[spelled]]

    def add_window(self, unit: int, text: str, names: tuple[str, ...]) -> None:
        present = sorted(set(names))
        self.name_windows.update(present)
        self.pair_windows.update(combinations(present, 2))
        if len(names) > 1:
            self.window_unit.append(unit)
            self.window_sizes.append(len(names))
            self.window_names.extend(self.number[n] for n in names)
            self.window_text.append(_clip(text))

    def windows(self) -> Iterator[tuple[int, list[str], str]]:
        """The windows kept: (text unit row, names, clipped text)."""
        start = 0
        for unit, size, text in zip(self.window_unit, self.window_sizes, self.window_text.values(), strict=True):
            yield unit, [self.names[n] for n in self.window_names[start:start + size]], text
            start += size


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
    return graph_of(read_texts(units["text"], cfg, advance), units["id"], cfg)


def read_texts(texts: pd.Series, cfg: ExtractGraphNlpConfig, advance: Callable[[], None] = lambda: None) -> _Reading:
    """What the text units' texts say (names, windows, mentions): all `graph_of` needs of them, so a caller can let
    the texts go before the tables are built."""
    return _read_units(texts, capitalised_mid_sentence(texts), cfg.window, advance)


def graph_of(found: _Reading, unit_ids: pd.Series, cfg: ExtractGraphNlpConfig) -> NlpGraph:
    """The graph of what `read_texts` found in the text units of these ids (in the same order)."""
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
    return NlpGraph(_entity_table(found, unit_ids, kept), _relationship_table(found, unit_ids, kept, edges), counts)


def _read_units(texts: pd.Series, known: set[str], window: str, advance: Callable[[], None]) -> _Reading:
    found = _Reading()
    for row, text in enumerate(texts):
        unit_sentences = sentences(text)
        by_sentence: dict[int, dict[str, None]] = {}  # the names of each sentence, each once, in order
        first: dict[str, int] = {}  # the sentence each name is first found in
        for mention in extract_mentions(text, known, unit_sentences):
            name = found.name(mention.name)
            found.kinds.setdefault(name, Counter())[mention.type] += 1
            by_sentence.setdefault(mention.sentence, {})[name] = None
            first.setdefault(name, mention.sentence)
        _add_mentions(found, row, unit_sentences, first)
        if window == "text_unit":
            found.total_windows += 1
            found.add_window(row, text, tuple(dict.fromkeys(n for in_sentence in by_sentence.values()
                                                            for n in in_sentence)))
        else:
            found.total_windows += len(unit_sentences)
            for i, in_sentence in sorted(by_sentence.items()):
                found.add_window(row, unit_sentences[i], tuple(in_sentence))
        advance()
    return found


def _add_mentions(found: _Reading, row: int, unit_sentences: list[str], first: dict[str, int]) -> None:
    """A row a name of the text unit, described by the sentence it is first found in (clipped once)."""
    clipped: dict[int, str] = {}
    for name, sentence in first.items():
        found.frequency[name] += 1
        found.mention_unit.append(row)
        found.mention_name.append(found.number[name])
        found.mention_description.append(clipped.get(sentence) or
                                         clipped.setdefault(sentence, _clip(unit_sentences[sentence])))


def _entity_table(found: _Reading, unit_ids: pd.Series, kept: set[str]) -> pd.DataFrame:
    """The rows of the kept names, each with the name's type (voted once)."""
    names = np.frombuffer(found.mention_name, dtype=np.int64)
    rows = np.array([n in kept for n in found.names], dtype=bool)[names] if len(names) else np.zeros(0, dtype=bool)
    if not rows.any():
        return pd.DataFrame({column: [] for column in ENTITY_COLUMNS}, columns=ENTITY_COLUMNS)
    spelled = pd.Series(found.names, dtype="str")
    types = pd.Series([majority_type(found.kinds[n]) if n in kept else "" for n in found.names], dtype="str")
    columns = {"text_unit_id": unit_ids.take(np.frombuffer(found.mention_unit, dtype=np.int64)[rows]),
               "name": spelled.take(names[rows]), "type": types.take(names[rows]),
               "description": found.mention_description.series(rows)}
    return pd.DataFrame({c: v.reset_index(drop=True) for c, v in columns.items()}, columns=ENTITY_COLUMNS)


def _relationship_table(found: _Reading, unit_ids: pd.Series, kept: set[str],
                        edges: dict[tuple[str, str], float]) -> pd.DataFrame:
    """One row a (text unit, pair of names with an edge), described by the first window they share there."""
    rows, sources, targets, strengths = array("q"), array("q"), array("q"), array("d")
    descriptions = TextColumn()
    seen: set[tuple[str, str]] = set()  # the pairs of the current unit (a unit's windows come together)
    current = -1
    for row, names, clipped in found.windows():
        if row != current:
            current, seen = row, set()
        for a, b in combinations(sorted(set(names) & kept), 2):
            if (a, b) in edges and (a, b) not in seen:
                seen.add((a, b))
                rows.append(row)
                sources.append(found.number[a])
                targets.append(found.number[b])
                descriptions.append(f"{a.title()} and {b.title()} are mentioned together: {clipped}")
                strengths.append(round(edges[(a, b)], 4))
    if not rows:
        return pd.DataFrame([], columns=RELATIONSHIP_COLUMNS)
    spelled = pd.Series(found.names, dtype="str")
    columns = {"text_unit_id": unit_ids.take(np.frombuffer(rows, dtype=np.int64)),
               "source": spelled.take(np.frombuffer(sources, dtype=np.int64)),
               "target": spelled.take(np.frombuffer(targets, dtype=np.int64)),
               "description": descriptions.series(), "strength": pd.Series(np.frombuffer(strengths, dtype=np.float64))}
    return pd.DataFrame({c: v.reset_index(drop=True) for c, v in columns.items()}, columns=RELATIONSHIP_COLUMNS)


def _hubs(edges: dict[tuple[str, str], float], count: int) -> set[str]:
    degree = Counter(name for pair in edges for name in pair)
    return {name for name, _ in degree.most_common(count)} if count else set()


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
