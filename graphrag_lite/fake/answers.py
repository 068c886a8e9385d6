"""The fake model's answers, chosen by the kind of call: the stage and step the gateway names (calls.CALL_STEP,
or a batch request's `call`), never by the prompt's wording, so an edited prompt gets the kind of answer its
call asks for. An answer is computed from the data sections of the prompt (the text, the description list,
the entities and relationships, the reports); a call of a kind the fake does not know, or a prompt without
the sections its answer reads, fails loudly (UnknownCall), as a provider refuses a request it cannot serve."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from graphrag_lite.context_tables import parse_rows
from graphrag_lite.fake.extraction import (
    COMPLETE,
    claim_extraction,
    clip,
    continue_extraction,
    graph_extraction,
    loop_check,
    sentences,
)
from graphrag_lite.words import STOPWORDS


class UnknownCall(ValueError):
    """A call of a stage and step the fake has no answer for (name the step where the call is made, and add
    its answer to ROUTES), or a prompt without the sections its answer is computed from."""


def answer(messages: list[dict[str, Any]], call: tuple[str, str]) -> str:
    """The answer to a call of this stage and step, computed from the text the conversation holds."""
    stage, step = call
    respond = ROUTES.get(f"{stage}.{step}") or ROUTES.get(step)
    if respond is None:
        raise UnknownCall(f"the fake model has no answer for a call of stage {stage!r}, step {step!r}")
    first = str(messages[0].get("content", ""))
    last = str(messages[-1].get("content", ""))
    prior = [str(m.get("content", "")) for m in messages[1:] if m.get("role") == "assistant"]
    try:
        return respond(first, last, prior)
    except (IndexError, KeyError, ValueError) as err:  # the data sections it computes from are not in the prompt
        raise UnknownCall(f"the fake model cannot read the prompt of a call of stage {stage!r}, step {step!r} "
                          f"({type(err).__name__}: {err}): it answers from the sections the packaged prompt "
                          "has") from None


def summarize(first: str, last: str, prior: list[str]) -> str:
    """Like a model asked for a comprehensive summary within the prompt's word limit: every description is
    represented, by the start of its first sentence, repeats once (a cut at a fixed length would leave the
    last ones out, which no model asked for comprehensiveness does, and the summary parser asks again)."""
    part = first.split("Description List:")[-1]
    descriptions = [d.strip(' "[],') for d in re.split(r"\n|\",\s*\"", part) if d.strip(' "[],')]
    unique = list(dict.fromkeys(d for d in descriptions if not d.startswith("#") and len(d) > 3))
    limit = re.search(r"Limit the summary to (\d+) words", first)
    share = max(8, int(limit.group(1)) // max(len(unique), 1)) if limit else 60  # words per description
    firsts = [" ".join(_first_sentence(d).split()[:share]) for d in unique]
    text = " ".join(s if s.endswith((".", "!", "?", "\u2026")) else f"{s}." for s in firsts)
    return text or "No description."


def _first_sentence(text: str) -> str:
    found = re.match(r".+?[.!?\u2026](?=\s|$)", text.strip(), re.DOTALL)
    return (found.group(0) if found else text).strip()


def community_report(first: str, last: str, prior: list[str]) -> str:
    entities = parse_rows(first, "Entities")
    relationships = parse_rows(first, "Relationships")
    names = [row[1] for row in entities if len(row) > 1][:3] or ["the community"]
    findings = [{"summary": f"{row[1]} and {row[2]}",
                 "explanation": f"{row[3] if len(row) > 3 else ''} [Data: Relationships ({row[0]})]"}
                for row in relationships[:5] if len(row) > 2]
    findings += [{"summary": row[1], "explanation": f"{row[2] if len(row) > 2 else ''} [Data: Entities ({row[0]})]"}
                 for row in entities[:10] if len(row) > 1]
    report = {
        "title": " and ".join(names[:2]) + (" community" if len(names) > 2 else ""),
        "summary": f"This community centres on {', '.join(names)}, with {len(entities)} entities ("
                   f"{', '.join(row[1] for row in entities[:12] if len(row) > 1)}) and "
                   f"{len(relationships)} relationships.",
        "rating": min(10.0, round(1 + len(entities) / 2 + len(relationships) / 4, 1)),
        "rating_explanation": "Rated by the number of entities and relationships in the community.",
        "findings": findings or [{"summary": names[0], "explanation": "The community has little detail."}],
    }
    return json.dumps(report)


def _words(text: str) -> set[str]:
    """Content words, cut to 7 letters so that word forms match ("conflicting" answers "conflict")."""
    return {w[:7] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS and len(w) > 2}


def _question(first: str, last: str) -> str:
    return last if last != first else first.rsplit("Question:", 1)[-1]


def map_points(first: str, last: str, prior: list[str]) -> str:
    question = _words(_question(first, last))
    points = []
    rows = re.split(r"\n(?=\d+\|)", first)  # a report's content may span lines: a row starts with its id
    for line in rows[1:]:
        shared = question & _words(line)
        if shared and "|" in line:
            ident = line.split("|", 1)[0].strip()
            points.append({"description": f"About {', '.join(sorted(shared))}: {clip(line, 200)} "
                                          f"[Data: Reports ({ident})]",
                           "score": min(100, 20 * len(shared))})
    points.sort(key=lambda p: -int(str(p["score"])))
    return json.dumps({"points": points[:5]})


def next_hop(first: str, last: str, prior: list[str]) -> str:
    """The far end of the first relationship that leaves the entities the question names (the bridge a
    model would follow next), or ENOUGH when there is none."""
    asked = _words(first.split("---Question---")[-1].split("---Information found so far---")[0])
    searched = first.split("---Already searched (do not repeat)---")[-1].split("---")[0].splitlines()
    for row in parse_rows(first, "Relationships"):
        ends = row[1:3] if len(row) > 2 else []
        named = [e for e in ends if _words(e) and _words(e) <= asked]
        others = [e for e in ends if e not in named and e not in searched]
        if named and others:
            return others[0]
    return "ENOUGH"


def rate_relevance(first: str, last: str, prior: list[str]) -> str:
    question = _words(first.split("---Question---")[1].split("---Report---")[0])
    shared = question & _words(first.split("---Report---")[-1])
    return json.dumps({"reason": f"shares {len(shared)} words with the question", "rating": min(5, len(shared))})


def plain_answer(first: str, last: str, prior: list[str] | None = None) -> str:
    """An answer from the lines of the context that share the most words with the question, citing the
    records they come from as `[Data: Section (id)]`."""
    question = _words(_question(first, last))
    section = ""
    scored: list[tuple[int, int, str]] = []
    for position, line in enumerate(first.splitlines()):
        header = re.fullmatch(r"-{3,}\s*([A-Za-z]+)[\w ]*-{3,}", line.strip())
        if header:
            name = header.group(1).capitalize()
            section = name if name in ("Reports", "Entities", "Relationships", "Claims", "Sources") else ""
            continue
        overlap = len(question & _words(line))
        if not overlap or len(line) < 20:
            continue
        ident = line.split("|", 1)[0].strip()
        cite = f" [Data: {section} ({ident})]" if ident.isdigit() and section else ""
        body = line.split("|", 1)[-1] if cite else line
        if len(body) > 300:  # quote the sentence that matches best, not the start of a long passage
            body = max(sentences(body), key=lambda s: len(question & _words(s)))
        scored.append((overlap, -position, clip(body, 300) + cite))
    best = [text for _, _, text in sorted(scored, reverse=True)[:3]]
    if not best:
        return "I do not know: the provided data does not answer this question."
    return "Based on the data: " + " ".join(best)


def judgment(first: str, last: str, prior: list[str]) -> str:
    """A judge that looks only at content, never at position: the answer with more distinct content words
    wins every criterion but directness, which the shorter answer wins; equal counts tie."""
    criteria = re.findall(r"^- ([\w -]+):", first.split("---Criteria---")[1].split("---")[0], re.M)
    answers = [first.split("---Answer 1---")[1].split("---Answer 2---")[0], first.split("---Answer 2---")[1]]
    sizes = [len(_words(a)) for a in answers]
    verdict = {}
    for name in criteria:
        wanted = min(sizes) if name == "directness" else max(sizes)
        winner: int | str = "tie" if sizes[0] == sizes[1] else sizes.index(wanted) + 1
        verdict[name] = {"winner": winner, "reason": f"distinct words: {sizes[0]} against {sizes[1]}"}
    return json.dumps(verdict)


def domain_answer(first: str, last: str, prior: list[str]) -> str:
    """The two most frequent content words of the passages, as a phrase."""
    counts = Counter(w for w in re.findall(r"[a-z]{4,}", first.split("-Task-")[0].lower()) if w not in STOPWORDS)
    top = [w for w, _ in counts.most_common(2)] or ["general"]
    return f"texts about {' and '.join(top)}"


def types_answer(first: str, last: str, prior: list[str]) -> str:
    return json.dumps(["person", "organization", "geo", "event"])


def alias_choice(first: str, last: str, prior: list[str]) -> str:
    """The candidate whose description shares most words with the short name's; 0 when none shares any."""
    described = first.split("What the text says about it:")[1].split("-Candidates-")[0]
    listing = first.split("-Candidates-")[1]
    candidates = re.findall(r"^(\d+)\. [^:]*: (.*)$", listing, re.M)
    shared = [(len(_words(described) & _words(text)), int(number)) for number, text in candidates]
    best = max(shared, default=(0, 0))
    tied = [n for overlap, n in shared if overlap == best[0]]
    return f"ANSWER: {best[1] if best[0] and len(tied) == 1 else 0}"


def _nothing_more(first: str, last: str, prior: list[str]) -> str:
    return COMPLETE


def _no(first: str, last: str, prior: list[str]) -> str:
    return "N"


# the answer of each kind of call: "stage.step" first, then the step alone
ROUTES: dict[str, Callable[[str, str, list[str]], str]] = {
    "extract_graph.extract": graph_extraction,
    "extract_graph.glean": continue_extraction,
    "extract_graph.check": loop_check,
    "extract_claims.extract": claim_extraction,
    "extract_claims.glean": _nothing_more,
    "extract_claims.check": _no,
    "prompt_tune.example": graph_extraction,
    "prompt_tune.domain": domain_answer,
    "prompt_tune.entity types": types_answer,
    "summarize": summarize,
    "report": community_report,
    "choose_alias": alias_choice,
    "map": map_points,
    "rate": rate_relevance,
    "next_hop": next_hop,
    "answer": plain_answer,
    "judge": judgment,
}
