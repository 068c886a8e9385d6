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

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from graphrag_lite.extraction.grounding import Grounding, ground
from graphrag_lite.extraction.replies import MarkerHabit, checked, yes_or_no
from graphrag_lite.extraction.tuples import COMPLETION_DELIMITER, ParsedReply
from graphrag_lite.llm.errors import LLMCallError
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.per_item import for_each
from graphrag_lite.prompts import fill

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


def first_messages(request: ExtractionRequest, text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": fill(request.template, input_text=text)}]


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
        if last_gleaning(request, gleaning, known, outcome.parsed):
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


def last_gleaning(request: ExtractionRequest, gleaning: int, known: set[str], parsed: ParsedReply) -> bool:
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


