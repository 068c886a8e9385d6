"""Descriptions summarized: one description per entity and per relationship, from the several the extraction
found. A single distinct description is kept verbatim, with no call. Several are joined with no call when a
summary would not pay: when they are few (`join_max_descriptions`) and their joined text short
(`join_max_tokens`), a summary saves fewer tokens in later prompts than the call costs, and it can only lose or
invent facts. The rest are summarized by the model; when they do not fit in `max_input_tokens` they are
folded: each batch is summarized, then the summaries, until one call takes them all. A summary that fails
after retries falls back to the descriptions joined (nothing is lost) and is listed in the problems."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from graphrag_lite.answer_parsing import ParseError, strip_reasoning
from graphrag_lite.config import SummarizeDescriptionsConfig
from graphrag_lite.extraction.tuples import without_markers
from graphrag_lite.llm.calls import gather_all
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.limits import PRIORITY
from graphrag_lite.llm.per_item import for_each
from graphrag_lite.prompts import fill
from graphrag_lite.tokens import count_tokens

SUMMARIZED, JOINED, SAID_IT_ALL = "summarized", "joined", "one said it all"


async def summarize_all(gateway: Gateway | None, cfg: SummarizeDescriptionsConfig, template: str,
                        subjects: list[str], lists: list[list[str]], problems: list[str],
                        advance: Callable[[], None], tally: Counter[str] | None = None) -> list[str]:
    """One description per subject; `tally` counts the subjects with several descriptions by what was done
    (SUMMARIZED, JOINED, SAID_IT_ALL). A summary that fails falls back to the descriptions joined."""
    tally = Counter() if tally is None else tally
    summaries = [without_call(s, d, cfg, tally, advance) for s, d in zip(subjects, lists, strict=True)]
    # longest first: its answer takes longest, and a correction it needs then leaves early, not in a round
    # of its own at the end
    sizes = [sum(map(len, d)) for d in lists]
    asked = sorted((i for i, summary in enumerate(summaries) if summary is None), key=lambda i: -sizes[i])
    tally[SUMMARIZED] += len(asked)
    if asked:
        assert gateway is not None

        async def ask(i: int) -> str:
            PRIORITY.set(sizes[i])  # in this item's task only: its correction goes before shorter lists
            return await summarize(gateway, cfg, template, subjects[i], lists[i])

        done = await for_each(asked, ask, advance)
        for i, result in zip(asked, done, strict=True):
            if result.error is None:
                summaries[i] = result.value
            else:
                summaries[i] = joined(lists[i])
                problems.append(f"summary of {subjects[i]} failed, its descriptions were joined instead: "
                                f"{result.error}")
    return [s or "" for s in summaries]


def without_call(subject: str, descriptions: list[str], cfg: SummarizeDescriptionsConfig, tally: Counter[str],
                 advance: Callable[[], None]) -> str | None:
    """The description when no summary is needed (one description, one that says it all, few and short
    ones joined), else None."""
    if len(descriptions) <= 1:
        return descriptions[0] if descriptions else ""
    if (complete := says_it_all(subject, descriptions)) is not None:
        tally[SAID_IT_ALL] += 1
    elif (complete := joined_if_short(descriptions, cfg)) is not None:
        tally[JOINED] += 1
    if complete is not None:
        advance()
    return complete


def joined_if_short(descriptions: list[str], cfg: SummarizeDescriptionsConfig) -> str | None:
    """The descriptions joined into one text when they are few and short enough to need no summary."""
    if len(descriptions) > cfg.join_max_descriptions:
        return None
    text = joined(descriptions)
    return text if count_tokens(text) <= cfg.join_max_tokens else None


def joined(descriptions: list[str]) -> str:
    """The descriptions as one text, in their order, each ending as a sentence: nothing left out."""
    return " ".join(d if d.rstrip().endswith(SENTENCE_ENDS) else f"{d.rstrip()}." for d in descriptions)


async def summarize(gateway: Gateway, cfg: SummarizeDescriptionsConfig, template: str, subject: str,
                    descriptions: list[str]) -> str:
    """One summary of many descriptions, folding batches that do not fit the input limit."""
    budget = cfg.max_input_tokens - count_tokens(fill(template, entity_name=subject, description_list="",
                                                      max_length=cfg.max_length))
    while True:
        batches = pack(descriptions, max(budget, 100))
        if len(batches) == len(descriptions):  # every item fills the budget alone: pair them up so each
            batches = [descriptions[i:i + 2] for i in range(0, len(descriptions), 2)]  # round halves the list
        # the batches of a round at once (in batch mode, one provider batch per round, not per batch)
        summaries = await gather_all(_summarize_batch(gateway, cfg, template, subject, batch) for batch in batches)
        if len(summaries) == 1:
            return summaries[0]
        descriptions = summaries


def pack(descriptions: list[str], budget: int) -> list[list[str]]:
    """Consecutive batches whose token count stays within the budget (a longer single one goes alone)."""
    batches: list[list[str]] = [[]]
    used = 0
    for text in descriptions:
        tokens = count_tokens(text) + 1
        if batches[-1] and used + tokens > budget:
            batches.append([])
            used = 0
        batches[-1].append(text)
        used += tokens
    return batches


async def _summarize_batch(gateway: Gateway, cfg: SummarizeDescriptionsConfig, template: str, subject: str,
                           batch: list[str]) -> str:
    if len(batch) == 1:
        return batch[0]
    prompt = fill(template, entity_name=subject, description_list="\n".join(sorted(batch)), max_length=cfg.max_length)
    result = await gateway.chat(cfg.model_id, [{"role": "user", "content": prompt}], stage="summarize_descriptions",
                                step="summarize", parse=covering(subject, batch), max_tokens=cfg.max_completion_tokens)
    return result.value


def _stems(text: str, leave_out: frozenset[str] | set[str] = frozenset()) -> set[str]:
    """Content words cut to six letters, so that a paraphrase's word forms still match."""
    return {w[:6] for w in re.findall(r"[^\W\d_]{4,}", text.lower()) if w not in leave_out} - _COMMON


def says_it_all(subject: str, descriptions: list[str]) -> str | None:
    """The longest description when it already holds every content word of the others ("Hello and welcome",
    "Hello, welcome"): it is their summary, and no model call is needed."""
    name = set(re.findall(r"\w+", subject.lower()))
    longest = max(descriptions, key=len)
    everything = set().union(*(_stems(d, name) for d in descriptions))
    return longest if everything <= _stems(longest, name) else None


def covering(subject: str, descriptions: list[str]) -> Callable[[str], str]:
    """A summary parser that also wants each description represented (the prompt asks for a comprehensive
    summary): a summary that covers the first descriptions and none of the last ones was most likely cut
    off, even when it ends with a full stop. A soft check: asked again once, a model that still leaves one
    out has its summary kept (and cached)."""
    name = set(re.findall(r"\w+", subject.lower()))
    stems = [_stems(d, name) for d in sorted(descriptions)]  # in the prompt's order
    # what only this description says: near-identical descriptions share most of their words
    wanted = [words - set().union(*(other for j, other in enumerate(stems) if j != i)) for i, words in enumerate(stems)]

    def parse(text: str) -> str:
        summary = summary_parser(text)
        found = _stems(summary, name)
        covered = [bool(words & found) for words in wanted if words]  # descriptions that say something of their own
        missed = covered.count(False)
        # the first descriptions covered and the last ones not: the shape of an answer that stopped early
        if missed and covered == sorted(covered, reverse=True):
            raise ParseError(f"the summary leaves out {missed} of the {len(descriptions)} descriptions; summarize "
                             "every one of them", partial=summary, soft=True)
        return summary

    return parse


_COMMON = {w[:6] for w in """about also after their there these those which while where when with from into that this
have been were will would could should other some such than then them they what your more most very only""".split()}  # noqa: SIM905


SENTENCE_ENDS = (".", "!", "?", "\u2026")  # a summary cut off mid-sentence ends with none of these


_PREAMBLE = re.compile(r"^(?:here(?:'s| is)|sure|certainly|below is|the following)\b[^\n]*:\s*\n", re.IGNORECASE)


def summary_parser(text: str) -> str:
    """The summary without a reasoning block, fences or a preamble line ("Here is the summary:")."""
    cleaned = strip_reasoning(text).strip()
    cleaned = re.sub(r"^```\w*\s*|\s*```$", "", cleaned).strip()
    cleaned = without_markers(_PREAMBLE.sub("", cleaned, count=1))
    if not cleaned:
        raise ParseError("the summary is empty")
    if not cleaned.rstrip("\"'\u201d\u2019)]*_ ").endswith(SENTENCE_ENDS):
        raise ParseError("the summary stops in the middle of a sentence (it looks cut off); give the whole summary")
    return cleaned
