"""Ask the chat model about the names entity resolution left apart as ambiguous (`entity_resolution.
confirm_with_model`): "Northwind" beside "Northwind Logistics" and "Northwind Bank" — which one, if any?

Off the hot path: two calls per ambiguous name, after the rules, cached like every call. The model sees the
short name's descriptions and each candidate's, and answers with a candidate's number or 0, once with the
candidates in one order and once in the reverse order: a name merges only when both answers pick the same
candidate, so a model that leans on a position (a small one often answers "1") merges nothing. A reply that
names no single candidate (prose that lists several, a refusal, an empty or cut-off answer) is asked again,
then counted as a failure: that name stays apart, which is what the rules decided anyway.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from graphrag_lite.answer_parsing import ParseError, strip_reasoning
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.per_item import for_each
from graphrag_lite.prompts import fill
from graphrag_lite.tokens import count_tokens

DESCRIPTION_TOKENS = 250  # of each entity's descriptions shown to the model
# "none of them", "the descriptions do not let me tell" (not "I can't help with that": a refusal decides nothing)
NONE_WORDS = re.compile(r"\b(none|neither|no candidate|unclear|unknown|not enough information|insufficient)\b|"
                        r"\b(cannot|can't|can not|unable to|not let me|impossible to)\s+(\w+\s+){0,2}"
                        r"(tell|determine|decide|say|know)\b", re.I)


@dataclass(frozen=True)
class Question:
    title: str
    type: str
    description: str
    candidates: list[tuple[str, str]]  # (title, description)

    def reversed(self) -> Question:
        return Question(self.title, self.type, self.description, self.candidates[::-1])

    def prompt(self, template: str) -> str:
        listing = "\n".join(f"{i}. {title}: {text}" for i, (title, text) in enumerate(self.candidates, start=1))
        return fill(template, name=self.title, type=self.type, description=self.description, candidates=listing)


def questions(ambiguous: pd.DataFrame, entities: pd.DataFrame) -> list[Question]:
    """One question per ambiguous name, with the descriptions of it and of the names it could be."""
    types = dict(zip(entities["title"], entities["type"], strict=True))
    described = {title: _shortened(" ".join(str(d) for d in texts))
                 for title, texts in zip(entities["title"], entities["descriptions"], strict=True)}
    rows = zip(ambiguous["title"].tolist(), ambiguous["could_be"].tolist(), strict=True)
    return [Question(title, str(types[title]), described[title], [(c, described[c]) for c in could_be])
            for title, could_be in rows if title in described and all(c in described for c in could_be)]


def _shortened(text: str) -> str:
    while count_tokens(text) > DESCRIPTION_TOKENS:
        text = text[: int(len(text) * 0.8)]
    return text or "(no description)"


def choice_parser(question: Question) -> Callable[[str], str | None]:
    """The candidate a reply picks (its title), None for "none of them", ParseError for anything else."""
    titles = [title for title, _ in question.candidates]

    def parse(reply: str) -> str | None:
        text = strip_reasoning(reply).strip().strip("`*").strip()
        labelled = re.findall(r"answer\W{0,3}\s*(\d+)", text, re.I)
        numbers = labelled or re.findall(r"(?<![\w.])(\d+)(?!\w|\.\d)", text)
        picked = {int(n) for n in numbers if 0 <= int(n) <= len(titles)}
        named = {t for t in titles if re.search(rf"\b{re.escape(t)}\b", text, re.I)}
        if len(picked) == 1 and (labelled or len(numbers) == 1):
            number = picked.pop()
            return titles[number - 1] if number else None
        if not numbers and len(named) == 1:
            return named.pop()
        if not numbers and not named and NONE_WORDS.search(text):
            return None
        raise ParseError(f"reply with one number from 0 to {len(titles)} (0: none of them), e.g. `ANSWER: 1`")

    return parse


@dataclass
class Outcome:
    picks: dict[str, str]  # short title -> the candidate title both answers chose
    changed_with_order: list[str]  # short titles whose two answers disagreed
    problems: list[str]


async def ask_all(gateway: Gateway, model_id: str, template: str, asked: list[Question],
                  max_tokens: int | None, advance: Callable[[], None]) -> Outcome:
    outcome = Outcome({}, [], [])

    async def pick(question: Question) -> str | None:
        return (await gateway.chat(model_id, [{"role": "user", "content": question.prompt(template)}],
                                   stage="merge_graph", step="choose_alias", parse=choice_parser(question),
                                   max_tokens=max_tokens)).value

    async def both_orders(question: Question) -> tuple[str | None, str | None]:
        return await pick(question), await pick(question.reversed())

    for question, done in zip(asked, await for_each(asked, both_orders, advance), strict=True):
        if done.value is None:
            outcome.problems.append(f"which name '{question.title}' denotes: no usable answer, left apart: "
                                    f"{done.error}")
        elif done.value[0] != done.value[1]:
            outcome.changed_with_order.append(question.title)
        elif done.value[0] is not None:
            outcome.picks[question.title] = done.value[0]
    return outcome
