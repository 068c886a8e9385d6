"""Extraction with gleaning: ask, then ask for what was missed, up to `max_gleanings` times.

After the first answer a follow-up says that many items were missed; before each further follow-up the
model is asked whether anything remains (Y/N), as in GraphRAG. Every answer is parsed on its own (GraphRAG
concatenates them with no separator and loses the first gleaned record), and every call goes through the
gateway, so answers are validated before they are cached.
"""

from __future__ import annotations

from collections.abc import Callable

from graphrag_lite.extraction.tuples import ParsedReply
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.structured import ParseError

CONTINUE_GRAPH = ("MANY entities and relationships were missed in the last extraction. Remember to ONLY emit "
                  "entities that match any of the previously extracted types. Add them below using the same format:\n")
CONTINUE_CLAIMS = ("MANY claims were missed in the last extraction. Add them below using the same format:\n")
LOOP_CHECK = ("It appears some entities, relationships or claims may have still been missed. Answer Y if there "
              "are still some that need to be added, or N if there are none. Answer with a single letter, Y or N.\n")


def checked(parse: Callable[[str], ParsedReply]) -> Callable[[str], ParsedReply]:
    """Reject answers that are cut off or carry nothing usable, so the gateway asks again (and never caches
    them); an answer with usable records and no completion marker is accepted."""

    def parse_checked(text: str) -> ParsedReply:
        parsed = parse(text)
        if parsed.truncated:
            raise ParseError("the answer stops in the middle of a record (it looks cut off); "
                             "give the complete list and end it with the completion delimiter")
        usable = parsed.entities or parsed.relationships or parsed.claims
        if not usable and not parsed.complete and text.strip():
            raise ParseError("the answer has no records in the required format and no completion delimiter")
        return parsed

    return parse_checked


def yes_or_no(text: str) -> bool:
    answer = text.strip().strip(".*\"'").upper()
    if answer[:1] not in ("Y", "N"):
        raise ParseError("answer with a single letter, Y or N")
    return answer.startswith("Y")


async def extract_with_gleaning(gateway: Gateway, model_id: str, stage: str, prompt: str, max_gleanings: int,
                                parse: Callable[[str], ParsedReply], continue_prompt: str,
                                json_mode: bool = False) -> tuple[ParsedReply, int]:
    """All records from the first answer and the gleanings, and the number of calls made."""
    parse_checked = checked(parse)
    history = [{"role": "user", "content": prompt}]
    first = await gateway.chat(model_id, history, stage=stage, parse=parse_checked, json_mode=json_mode)
    result, calls = first.value, 1
    history.append({"role": "assistant", "content": first.text})
    for gleaning in range(max_gleanings):
        history.append({"role": "user", "content": continue_prompt})
        more = await gateway.chat(model_id, history, stage=stage, parse=parse_checked, json_mode=json_mode)
        calls += 1
        result.extend(more.value)
        history.append({"role": "assistant", "content": more.text})
        if gleaning == max_gleanings - 1:
            break
        check = await gateway.chat(model_id, [*history, {"role": "user", "content": LOOP_CHECK}], stage=stage,
                                   parse=yes_or_no)
        calls += 1
        if not check.value:
            break
    return result, calls
