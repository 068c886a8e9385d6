"""Extraction of every text unit with gleaning: ask, then ask for what was missed, up to `max_gleanings` times.

After the first answer a follow-up says that many items were missed; before each further follow-up the
model is asked whether anything remains (Y/N), as in GraphRAG. A follow-up sends the whole conversation so
far (history, GraphRAG's way) or, for graph extraction with `gleaning: compact`, the first prompt unchanged
and the entity names found so far instead of the answers: far fewer prompt tokens, and the first prompt
stays a prefix a provider's prompt cache serves. Every answer is parsed on its own (GraphRAG concatenates
them with no separator and loses the first gleaned record), and every call goes through the gateway, so
answers are validated before they are cached.

What a real model may answer, and what happens:
- records, with or without the completion marker: kept;
- nothing but the completion marker (or, to a follow-up, `##`, prose or "no more"): no records, which is
  a valid answer;
- an empty answer, prose, a refusal or the input text echoed back to the first request: not usable; the
  model is asked once more, and not again when it answers the same way;
- an answer cut off in the middle of a record: its complete records are kept when asking again does not
  help, and the unit is reported as partly extracted;
- a follow-up (gleaning or the Y/N check) that fails: the records found so far are kept, the failure is
  reported.
Entities whose names are not in the text unit are then dropped (grounding.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from graphrag_lite.answer_parsing import ParseError, strip_reasoning
from graphrag_lite.estimate import REPLY_TO_INPUT_RATIO, CallEstimate, gleaning_estimate
from graphrag_lite.extraction.grounding import Grounding, ground, normalize
from graphrag_lite.extraction.tuples import COMPLETION_DELIMITER, ParsedReply
from graphrag_lite.llm.errors import LLMCallError
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.per_item import for_each
from graphrag_lite.pipeline.contract import StageResult
from graphrag_lite.prompts import fill
from graphrag_lite.tokens import count_tokens

CONTINUE_GRAPH = ("MANY entities and relationships were missed in the last extraction. Remember to ONLY emit "
                  "entities that match any of the previously extracted types. Add them below using the same format:\n")
CONTINUE_CLAIMS = ("MANY claims were missed in the last extraction. Add them below using the same format:\n")
# compact follow-ups: the names found so far, then what to do (the model no longer sees its answers)
FOUND_NAMES = "These entities were already extracted from the text above:\n{names}\n\n"
_MISSED = ("MANY entities and relationships were missed in the last extraction. Add ONLY what was missed: the "
           "entities of the entity types asked for that are not listed above, and the relationships that were "
           "missed, between any entities of the text, listed or new. ")
COMPACT_GRAPH = _MISSED + f"Use the same format as asked above and end with {COMPLETION_DELIMITER}\n"
COMPACT_GRAPH_JSON = _MISSED + ('Answer with one JSON object of the same shape as asked above, {"entities": [...], '
                                '"relationships": [...]}, holding only what was missed.\n')
LOOP_CHECK = ("It appears some entities, relationships or claims may have still been missed. Answer Y if there "
              "are still some that need to be added, or N if there are none. Answer with a single letter, Y or N.\n")
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


@dataclass(frozen=True)
class ExtractionRequest:
    """What one extraction stage asks of every text unit."""

    stage: str
    model_id: str
    template: str  # the prompt, with {input_text} still to fill
    parse: Callable[[str], ParsedReply]
    continue_prompt: str
    max_gleanings: int
    json_mode: bool = False
    compact: bool = False  # compact follow-ups (graph extraction only: they list entity names)
    # a compact follow-up as two user messages (LiteLLM joins them for Claude, its cache marker on the first);
    # else one, since some chat templates (Gemma's, older Mistral and Llama ones) refuse two user turns in a row
    separate_turns: bool = False
    max_tokens: int | None = None
    grounded: bool = True
    habit: MarkerHabit = field(default_factory=MarkerHabit, compare=False)


@dataclass
class UnitOutcome:
    text_unit_id: str
    parsed: ParsedReply | None  # None: nothing could be extracted from the unit
    calls: int = 0
    error: str | None = None
    partial: list[str] = field(default_factory=list)  # failures that left the unit partly extracted
    grounding: Grounding = field(default_factory=Grounding)


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


def first_messages(request: ExtractionRequest, text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": fill(request.template, input_text=text)}]


def _cached_calls(gateway: Gateway, request: ExtractionRequest, text: str) -> tuple[bool, int | None]:
    """One unit's calls, followed through the cache as `extract_with_gleaning` makes them: whether all are
    cached, and the tokens of the cached first answer (None when a run would ask for it)."""
    history = first_messages(request, text)
    answer = gateway.cached_answer(request.model_id, history, request.json_mode, request.max_tokens)
    if answer is None:
        return False, None
    try:
        parsed = checked(request.parse, text, False, request.habit)(answer)
    except ParseError:  # the run's check refuses it: a run would ask again
        return False, None
    try:
        return _gleanings_cached(gateway, request, text, [*history, {"role": "assistant", "content": answer}],
                                 parsed), count_tokens(answer)
    except ParseError:  # a cached follow-up a run would not use either: it asks again
        return False, count_tokens(answer)


def _gleanings_cached(gateway: Gateway, request: ExtractionRequest, text: str, history: list[dict[str, str]],
                      parsed: ParsedReply) -> bool:
    for gleaning in range(request.max_gleanings):
        asked = follow_up(request, history, parsed, gleaning_prompt(request))
        more = gateway.cached_answer(request.model_id, asked, request.json_mode, request.max_tokens)
        if more is None:
            return False
        known = {e.name for e in parsed.entities}
        parsed.extend(checked(request.parse, text, True, request.habit)(more))
        if not request.compact:
            history = [*asked, {"role": "assistant", "content": more}]
        if _last_gleaning(request, gleaning, known, parsed):
            break
        check = gateway.cached_answer(request.model_id, follow_up(request, history, parsed, LOOP_CHECK),
                                      max_tokens=request.max_tokens)
        if check is None:
            return False
        if not yes_or_no(check):
            break
    return True


def extraction_estimate(gateway: Gateway, request: ExtractionRequest, units: pd.DataFrame,
                        reply_ratio: float = REPLY_TO_INPUT_RATIO) -> CallEstimate:
    """A dry run's estimate of an extraction stage: the calls of every text unit the cache does not hold (an
    update, or a run with other gleaning settings, sends only the rest). `reply_ratio`: an answer's tokens per
    token of its text."""
    base = count_tokens(fill(request.template, input_text=""))
    asked = count_tokens((FOUND_NAMES.format(names="") if request.compact else "") + gleaning_prompt(request))
    texts = [int(n) for n in units["n_tokens"]]
    answered = [_cached_calls(gateway, request, text) for text in units["text"]]
    return gleaning_estimate(request.stage, request.model_id, [base + n for n in texts], texts, answered,
                             request.max_gleanings, asked, compact=request.compact, reply_ratio=reply_ratio)


async def extract_with_gleaning(gateway: Gateway, request: ExtractionRequest, text: str) -> UnitOutcome:
    """All records of one text unit from the first answer and the gleanings. LLMCallError when the first
    answer is unusable (and nothing of it can be kept)."""
    history = first_messages(request, text)
    outcome = UnitOutcome("", None, calls=1)
    try:
        first = await gateway.chat(request.model_id, history, stage=request.stage, step="extract",
                                   parse=checked(request.parse, text, False, request.habit),
                                   json_mode=request.json_mode, max_tokens=request.max_tokens,
                                   resent_prefix=request.max_gleanings > 0)
    except LLMCallError as err:
        if err.partial is None:
            raise
        outcome.parsed = err.partial
        outcome.partial.append(f"answer cut off, its {err.partial.records} complete records kept: {err}")
        return outcome
    outcome.parsed = first.value
    history.append({"role": "assistant", "content": first.text})
    await _glean(gateway, request, text, history, outcome)
    return outcome


def follow_up(request: ExtractionRequest, history: list[dict[str, str]], parsed: ParsedReply, prompt: str
              ) -> list[dict[str, str]]:
    """The messages of a follow-up: the conversation so far and `prompt`; compact, the first prompt
    byte for byte (a cached prefix), then the entity names found so far and `prompt`."""
    if not request.compact:
        return [*history, {"role": "user", "content": prompt}]
    names = "\n".join(dict.fromkeys(e.name for e in parsed.entities)) or "(none)"
    asked = FOUND_NAMES.format(names=names) + prompt
    if request.separate_turns:
        return [history[0], {"role": "user", "content": asked}]
    return [{"role": "user", "content": f"{history[0]['content']}\n\n{asked}"}]


def gleaning_prompt(request: ExtractionRequest) -> str:
    if not request.compact:
        return request.continue_prompt
    return COMPACT_GRAPH_JSON if request.json_mode else COMPACT_GRAPH


async def _glean(gateway: Gateway, request: ExtractionRequest, text: str, history: list[dict[str, str]],
                 outcome: UnitOutcome) -> None:
    assert outcome.parsed is not None
    for gleaning in range(request.max_gleanings):
        asked = follow_up(request, history, outcome.parsed, gleaning_prompt(request))
        outcome.calls += 1
        try:
            more = await gateway.chat(request.model_id, asked, stage=request.stage, step="glean",
                                      parse=checked(request.parse, text, True, request.habit),
                                      json_mode=request.json_mode, max_tokens=request.max_tokens, resent_prefix=True)
        except LLMCallError as err:
            if err.partial is not None:
                outcome.parsed.extend(err.partial)
            outcome.partial.append(f"gleaning {gleaning + 1} failed, the records found before it are kept: {err}")
            return
        known = {e.name for e in outcome.parsed.entities}
        outcome.parsed.extend(more.value)
        if not request.compact:  # a compact follow-up starts from the first prompt again, with the names so far
            history = [*asked, {"role": "assistant", "content": more.text}]
        if _last_gleaning(request, gleaning, known, outcome.parsed):
            return
        outcome.calls += 1
        try:
            check = await gateway.chat(request.model_id, follow_up(request, history, outcome.parsed, LOOP_CHECK),
                                       stage=request.stage, step="check", parse=yes_or_no, resent_prefix=True,
                                       max_tokens=request.max_tokens)  # room for a reasoning model's thoughts
        except LLMCallError as err:
            outcome.partial.append(f"the check for more records failed, gleaning stopped: {err}")
            return
        if not check.value:
            return


def _last_gleaning(request: ExtractionRequest, gleaning: int, known: set[str], parsed: ParsedReply) -> bool:
    """Whether no follow-up comes after this gleaning: it was the last allowed; or, compact, it named no new
    entity, so the next follow-up (the first prompt and the same names) would be this one again, byte for byte."""
    return gleaning == request.max_gleanings - 1 or (request.compact and not {e.name for e in parsed.entities} - known)


async def extract_units(gateway: Gateway, request: ExtractionRequest, units: pd.DataFrame,
                        advance: Callable[[], None] | None = None) -> list[UnitOutcome]:
    """Every text unit, concurrently; a unit that fails is an outcome with its error, never an exception."""
    attempts = await for_each(units["text"], lambda text: grounded_extraction(gateway, request, text), advance)
    outcomes = []
    for unit_id, done in zip(units["id"], attempts, strict=True):
        outcome = done.value or UnitOutcome(unit_id, None, error=str(done.error))
        outcome.text_unit_id = unit_id
        outcomes.append(outcome)
    return outcomes


async def grounded_extraction(gateway: Gateway, request: ExtractionRequest, text: str) -> UnitOutcome:
    """One unit's extraction, its records grounded in its text as soon as its calls end: that work is done
    while other units' calls are in flight, not after the last answer."""
    outcome = await extract_with_gleaning(gateway, request, text)
    if outcome.parsed is not None and request.grounded:
        outcome.grounding = ground(outcome.parsed, text)
    return outcome


def extraction_result(outcomes: list[UnitOutcome], units: pd.DataFrame, tables: dict[str, pd.DataFrame],
                      records: int, what: str) -> StageResult:
    """The stage's result: its `tables`, and what it reports about its units (problems for the terminal and
    stats.json, figures for the details; incomplete when a unit failed or was partly extracted)."""
    readable = dict(zip(units["id"], units["human_readable_id"], strict=True))
    problems, dropped, ungrounded, created = [], [], [], []
    for outcome in outcomes:
        unit = f"text unit {readable[outcome.text_unit_id]}"
        if outcome.parsed is None:
            problems.append(f"{unit}: extraction failed: {outcome.error}")
            continue
        problems += [f"{unit}: {p}" for p in outcome.partial]
        dropped += [f"{unit}: {d}" for d in outcome.parsed.dropped]
        ungrounded += [f"{unit}: {d}" for d in outcome.grounding.ungrounded]
        created += [f"{unit}: {name}" for name in outcome.grounding.created]
    failed = sum(o.parsed is None for o in outcomes)
    partly = sum(bool(o.partial) for o in outcomes if o.parsed is not None)
    total = max(1, len(outcomes))
    line = f"{len(outcomes) - failed} of {len(outcomes)} text units -> {what}"
    if failed or partly:
        line += f"; {failed} text units FAILED ({failed / total:.0%}), {partly} partly extracted"
    unusable = len(dropped) + len(ungrounded)
    if unusable:
        line += (f"; {unusable} records dropped ({unusable / max(1, unusable + records):.0%}: "
                 f"{len(dropped)} unusable, {len(ungrounded)} not in their text unit)")
    if created:
        line += f"; {len(created)} entities added from relationship ends"
    details = {"text_units": len(outcomes), "failed_text_units": failed, "partly_extracted_text_units": partly,
               "failed_share": round(failed / total, 4), "dropped_records": dropped, "ungrounded_records": ungrounded,
               "entities_from_relationship_ends": created,
               "calls_per_unit": round(sum(o.calls for o in outcomes) / total, 3)}
    return StageResult(tables, line, problems, details, complete=not failed and not partly)

