"""A dry run's estimate of an extraction stage: each text unit's calls followed through the answer cache as a
run would make them (cached calls are free), the rest estimated (estimate.gleaning_estimate)."""

from __future__ import annotations

import pandas as pd

from graphrag_lite.answer_parsing import ParseError
from graphrag_lite.estimate import REPLY_TO_INPUT_RATIO, CallEstimate, gleaning_estimate
from graphrag_lite.extraction.gleaning import (
    FOUND_NAMES,
    LOOP_CHECK,
    ExtractionRequest,
    first_messages,
    follow_up,
    gleaning_prompt,
    last_gleaning,
)
from graphrag_lite.extraction.replies import checked, yes_or_no
from graphrag_lite.extraction.tuples import ParsedReply
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.prompts import fill
from graphrag_lite.tokens import count_tokens


def cached_calls(gateway: Gateway, request: ExtractionRequest, text: str) -> tuple[bool, int | None]:
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
        if last_gleaning(request, gleaning, known, parsed):
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
    answered = [cached_calls(gateway, request, text) for text in units["text"]]
    return gleaning_estimate(request.stage, request.model_id, [base + n for n in texts], texts, answered,
                             request.max_gleanings, asked, compact=request.compact, reply_ratio=reply_ratio)
