"""Entities and relationships of the fast method: rule-based mentions, co-occurrence edges weighted by
normalized PMI, and pruning (rare entities, weak or one-off edges, the biggest hubs).

NPMI(a, b) = log(p(a, b) / (p(a) p(b))) / -log p(a, b) over windows (sentences or text units): 1 when two
entities always appear together, 0 when they co-occur by chance. An edge keeps its NPMI as the strength of
each window it appears in, so its merged weight grows with evidence.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import combinations

import pandas as pd

from graphrag_lite.config import ExtractGraphNlpConfig
from graphrag_lite.nlp.extractor import capitalised_mid_sentence, extract_mentions, majority_type, sentences

ENTITY_COLUMNS = ["text_unit_id", "name", "type", "description"]
RELATIONSHIP_COLUMNS = ["text_unit_id", "source", "target", "description", "strength"]


@dataclass
class Window:
    text_unit_id: str
    text: str
    names: list[str]


@dataclass
class NlpGraph:
    entities: pd.DataFrame
    relationships: pd.DataFrame
    counts: dict[str, int] = field(default_factory=dict)


def npmi(pair: int, a: int, b: int, windows: int) -> float:
    if pair == 0:
        return -1.0
    if pair == windows:
        return 1.0
    return math.log(pair * windows / (a * b)) / -math.log(pair / windows)


def extract_nlp_graph(units: pd.DataFrame, cfg: ExtractGraphNlpConfig,
                      advance: Callable[[], None] = lambda: None) -> NlpGraph:
    """`advance` is called once per text unit read (a progress bar)."""
    known = capitalised_mid_sentence(units["text"])
    windows: list[Window] = []
    total_windows = 0
    kinds: dict[str, list[str]] = {}
    first_sentence: dict[tuple[str, str], str] = {}
    for unit_id, text in zip(units["id"], units["text"], strict=True):
        unit_sentences = sentences(text)
        by_sentence: dict[int, dict[str, None]] = {}  # the names of each sentence, each once, in order
        for mention in extract_mentions(text, known):
            kinds.setdefault(mention.name, []).append(mention.type)
            by_sentence.setdefault(mention.sentence, {})[mention.name] = None
            first_sentence.setdefault((unit_id, mention.name), unit_sentences[mention.sentence])
        total_windows += 1 if cfg.window == "text_unit" else len(unit_sentences)
        if cfg.window == "text_unit":
            names = list(dict.fromkeys(n for found in by_sentence.values() for n in found))
            windows.append(Window(unit_id, text, names))
        else:
            windows += [Window(unit_id, unit_sentences[i], list(found)) for i, found in sorted(by_sentence.items())]
        advance()

    frequency = Counter(name for unit_id, name in first_sentence)  # text units mentioning each name
    kept = {name for name, n in frequency.items() if n >= cfg.min_entity_frequency}
    pair_windows, name_windows = _count(windows, kept)
    edges = {pair: npmi(n, name_windows[pair[0]], name_windows[pair[1]], total_windows)
             for pair, n in pair_windows.items() if n >= cfg.min_cooccurrence}
    edges = {pair: score for pair, score in edges.items() if score >= cfg.min_npmi}
    hubs = _hubs(edges, cfg.remove_top_hubs)
    kept -= hubs
    edges = {pair: score for pair, score in edges.items() if not set(pair) & hubs}

    entity_rows = [(unit_id, name, majority_type(kinds[name]), _clip(sentence))
                   for (unit_id, name), sentence in first_sentence.items() if name in kept]
    relationship_rows = []
    seen: set[tuple[str, str, str]] = set()
    for window in windows:
        for a, b in combinations(sorted(set(window.names) & kept), 2):
            if (a, b) in edges and (window.text_unit_id, a, b) not in seen:
                seen.add((window.text_unit_id, a, b))
                relationship_rows.append((window.text_unit_id, a, b, f"{a.title()} and {b.title()} are mentioned "
                                          f"together: {_clip(window.text)}", round(edges[(a, b)], 4)))
    counts = {"names_found": len(frequency), "entities_kept": len(kept), "rare_entities_pruned":
              len(frequency) - len(kept) - len(hubs), "hubs_removed": len(hubs), "windows": total_windows,
              "co_occurring_pairs": len(pair_windows), "edges_kept": len(edges)}
    return NlpGraph(pd.DataFrame(entity_rows, columns=ENTITY_COLUMNS),
                    pd.DataFrame(relationship_rows, columns=RELATIONSHIP_COLUMNS), counts)


def _count(windows: Iterable[Window], kept: set[str]) -> tuple[Counter[tuple[str, str]], Counter[str]]:
    pairs: Counter[tuple[str, str]] = Counter()
    names: Counter[str] = Counter()
    for window in windows:
        present = sorted(set(window.names) & kept)
        names.update(present)
        pairs.update(combinations(present, 2))
    return pairs, names


def _hubs(edges: dict[tuple[str, str], float], count: int) -> set[str]:
    degree = Counter(name for pair in edges for name in pair)
    return {name for name, _ in degree.most_common(count)} if count else set()


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
