"""The fast method's one description of an entity or relationship, with no model: its first descriptions (in
first-seen order) joined, up to MAX_CHARACTERS. join_descriptions joins them (`joined`); merge_graph keeps only
the descriptions that joining reads (`read_by_joining`), so the millions of sentences the fast method finds are
not carried from stage to stage."""

from __future__ import annotations

import numpy as np

MAX_CHARACTERS = 600


def joined(descriptions: list[str], max_characters: int = MAX_CHARACTERS) -> str:
    text = ""
    for description in descriptions:
        if text and len(text) + len(description) > max_characters:
            break
        text = f"{text} {description}".strip()
    return text


def read_by_joining(lengths: np.ndarray, stripped_lengths: np.ndarray, groups: np.ndarray,
                    max_characters: int = MAX_CHARACTERS) -> np.ndarray:
    """A mask of the descriptions `joined` reads of each group (rows sorted by group, each group's in its order),
    from their lengths and their lengths without surrounding whitespace: a group's first ones, up to the one
    that would take the joined text past `max_characters`.

    `joined` strips the text it builds, so the text before a description is at least as long as the stripped
    descriptions before it plus a space between each two that are not blank: a description is read when nothing
    before it is left or when that length and its own stay within the budget. Where no description has
    surrounding whitespace this is exactly what `joined` reads; otherwise it may keep a description more, never
    one fewer, and `joined` of the kept ones is `joined` of them all."""
    if not len(groups):
        return np.zeros(0, dtype=bool)
    starts = np.r_[True, groups[1:] != groups[:-1]]
    group_start = np.flatnonzero(starts)[np.cumsum(starts) - 1]  # each row's group's first row

    def before(values: np.ndarray) -> np.ndarray:  # the sum over the rows before each one in its group
        total = np.cumsum(values, dtype=np.int64) - values
        return total - total[group_start]

    text = before(stripped_lengths)
    nonblank = before((stripped_lengths > 0).astype(np.int64))
    fits = (nonblank == 0) | (text + nonblank - 1 + lengths <= max_characters)
    stops = (~fits).astype(np.int64)
    return before(stops) + stops == 0  # read while no description before it, nor itself, stops the joining
