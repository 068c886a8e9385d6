"""Pairwise judging of answers, as in the GraphRAG paper: a judge model compares two answers to the same
question on named criteria (comprehensiveness, diversity, empowerment, directness by default).

Judges favour a position. Every pair is judged twice, once in each order, and a variant's score for a
criterion is the mean over both orders of 1 (it won), 0.5 (tie) or 0 (it lost): a judge that always picks
the first answer gives every variant 0.5, not a false win.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphrag_lite.answer_parsing import ParseError, parse_json_object
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.ledger import summarize
from graphrag_lite.prompts import fill, load_prompt

CRITERIA = {
    "comprehensiveness": "How much detail does the answer provide to cover all aspects and details of the question?",
    "diversity": "How varied and rich is the answer in providing different perspectives and insights on the question?",
    "empowerment": "How well does the answer help the reader understand and make informed judgements about the topic?",
    "directness": "How specifically and clearly does the answer address the question?",
}
ORDERS = ("variant first", "baseline first")
_WINNERS = {"1": 1, "answer 1": 1, "first": 1, "2": 2, "answer 2": 2, "second": 2, "tie": 0, "0": 0, "both": 0,
            "neither": 0, "equal": 0, "draw": 0, "none": 0}


@dataclass
class Judgment:
    """One judge call: `winners` by criterion, as the judge named them (1, 2 or 0 for a tie), and the
    variant's points by criterion once the order is undone."""

    question_id: str
    method: str
    variant: str
    baseline: str
    order: str  # variant first | baseline first
    winners: dict[str, int]
    points: dict[str, float]
    reasons: dict[str, str]
    cost_usd: float | None = None  # of this call with an empty cache (None: the model has no known price)


def judge_parser(criteria: list[str]) -> Any:
    def parse(answer: str) -> tuple[dict[str, int], dict[str, str]]:
        data = parse_json_object(answer)
        lowered = {str(k).strip().lower(): v for k, v in data.items()}
        winners, reasons = {}, {}
        for name in criteria:
            verdict = lowered.get(name.strip().lower())
            if verdict is None:
                raise ParseError(f"the answer has no verdict for '{name}'; give one key per criterion: "
                                 f"{', '.join(criteria)}")
            raw = verdict.get("winner") if isinstance(verdict, dict) else verdict
            winner = _WINNERS.get(_winner_text(raw))
            if winner is None:
                raise ParseError(f"'{name}': winner {raw!r} is not 1, 2 or \"tie\"")
            winners[name] = winner
            reasons[name] = str(verdict.get("reason", "")) if isinstance(verdict, dict) else ""
        return winners, reasons

    return parse


def _winner_text(raw: Any) -> str:
    """`1`, `1.0`, `"Answer 1."`, `"Tie"` -> "1", "1", "answer 1", "tie"."""
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    text = " ".join(str(raw).lower().replace("*", " ").split()).strip(" .!\"'")
    return text.removesuffix(".0")


async def judge_pair(gateway: Gateway, model_id: str, question: str, answers: tuple[str, str], criteria: list[str],
                     prompt_file: Path | None, labels: tuple[str, str, str, str]) -> list[Judgment]:
    """Both orders of one pair. `answers` is (variant's, baseline's); `labels` is (question id, method,
    variant, baseline)."""
    template = load_prompt(prompt_file, "pairwise_judge.txt",
                           required=("criteria", "question", "answer_1", "answer_2"))
    listing = "\n".join(f"- {name}: {CRITERIA.get(name, name)}" for name in criteria)
    judgments = []
    for order, (first, second) in zip(ORDERS, (answers, answers[::-1]), strict=True):
        system = fill(template, criteria=listing, question=question, answer_1=first, answer_2=second)
        seen = len(gateway.ledger.records)
        reply = await gateway.chat(model_id, [{"role": "system", "content": system},
                                              {"role": "user", "content": "Judge the two answers."}],
                                   stage="judge", step="judge", parse=judge_parser(criteria), json_mode=True)
        winners, reasons = reply.value
        variant_position = 1 if order == ORDERS[0] else 2
        points = {name: 0.5 if w == 0 else float(w == variant_position) for name, w in winners.items()}
        cost = summarize(gateway.ledger.records[seen:])["cost_usd_without_cache"]
        judgments.append(Judgment(*labels, order=order, winners=winners, points=points, reasons=reasons,
                                  cost_usd=cost))
    return judgments


def win_rates(judgments: list[dict[str, Any]], criteria: list[str]) -> dict[str, float]:
    """The variant's mean points per criterion over every judgment (both orders), and `overall`."""
    rates = {name: _mean([j["points"][name] for j in judgments if name in j["points"]]) for name in criteria}
    rates["overall"] = _mean([v for v in rates.values() if not math.isnan(v)])
    return rates


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 3) if values else math.nan
