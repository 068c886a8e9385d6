"""Which extraction answers can be used, in the ways real models answer: records with or without the
completion marker, nothing more to add, an answer cut off mid-record, an echo of the input text, a refusal;
and the Y/N check for more records, wherever a model puts its letter."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from graphrag_lite.answer_parsing import ParseError, strip_reasoning
from graphrag_lite.extraction.grounding import normalize
from graphrag_lite.extraction.tuples import ParsedReply

ECHO_SHARE = 0.5  # an answer most of whose word triples come from the input text is an echo


@dataclass
class MarkerHabit:
    """Whether the model ends its answers with the completion marker. Once it plainly does, an answer
    without the marker is suspect: cut off at a record boundary, it would look complete otherwise."""

    with_marker: int = 0
    without: int = 0

    def observe(self, parsed: ParsedReply) -> None:
        if parsed.records:
            self.with_marker += parsed.complete
            self.without += not parsed.complete

    def expected(self) -> bool:
        return self.with_marker >= 5 and self.without <= 0.1 * self.with_marker


def checked(parse: Callable[[str], ParsedReply], source: str, follow_up: bool,
            habit: MarkerHabit | None = None) -> Callable[[str], ParsedReply]:
    """Accept what can be used; reject (so the gateway asks again, and never caches) an empty, cut-off,
    echoed or record-less answer. To a follow-up, an answer with no records means there is nothing more."""

    def parse_checked(text: str) -> ParsedReply:
        if not strip_reasoning(text).strip():
            raise ParseError("the answer is empty")
        parsed = parse(text)
        if parsed.truncated:
            raise ParseError("the answer stops in the middle of a record (it looks cut off); give the complete "
                             "list and end it with the completion delimiter", partial=parsed)
        if habit is not None and parsed.records and not parsed.complete and habit.expected():
            raise ParseError("the answer has no completion delimiter, so it may be cut off; give the complete list "
                             "and end it with the completion delimiter", partial=parsed)
        if habit is not None:
            habit.observe(parsed)
        if not parsed.records and parsed.dropped:
            raise ParseError(f"none of the records could be used (for example: {parsed.dropped[0][:150]})")
        if parsed.records or parsed.complete or follow_up:
            return parsed
        if echoes(text, source):
            raise ParseError("the answer repeats the input text; list the records in the required format instead")
        raise ParseError("the answer has no records in the required format and no completion delimiter")

    return parse_checked


def echoes(answer: str, source: str) -> bool:
    words = normalize(answer).split()
    triples = {tuple(words[i:i + 3]) for i in range(len(words) - 2)}
    if len(triples) < 10:
        return False
    known = normalize(source).split()
    found = {tuple(known[i:i + 3]) for i in range(len(known) - 2)}
    return len(triples & found) >= ECHO_SHARE * len(triples)


def yes_or_no(text: str) -> bool:
    """Y or N where models put it: first ("N.", "**Yes**", "No more"), after "answer" ("Answer: N", "The answer
    is Y"), or alone on the last line after an explanation."""
    answer = re.sub(r"[`*_\"']", "", strip_reasoning(text)).strip()
    found = _FIRST_WORD.match(answer) or _AFTER_ANSWER.search(answer) or _LAST_LINE.search(answer)
    if found is None:
        raise ParseError("answer with a single letter, Y or N")
    return found.group(1).upper().startswith("Y")


_FIRST_WORD = re.compile(r"^\W*(Y|N|YES|NO)\b", re.IGNORECASE)


_AFTER_ANSWER = re.compile(r"\banswer(?:\s+is|\s*:)\W*\b(Y|N|YES|NO)\b", re.IGNORECASE)


_LAST_LINE = re.compile(r"(?:^|\n)\W*(Y|N|YES|NO)\W*$", re.IGNORECASE)
