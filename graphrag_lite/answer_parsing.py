"""Parse model answers that should be JSON: tolerant of fences, prose and small syntax slips, strict about
the shape (pydantic). A parser raises ParseError with a short reason the model can act on."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_REASONING = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)", re.DOTALL | re.IGNORECASE)


class ParseError(ValueError):
    """The answer does not have the required form; the message tells the model what was wrong. `partial`
    carries what could still be used of it (the complete records of a cut-off answer), or None. A `soft`
    error is a wish, not a requirement: the model is asked once more, and if it answers the same way its
    answer (`partial`) is accepted and cached."""

    def __init__(self, message: str, partial: Any = None, soft: bool = False) -> None:
        super().__init__(message)
        self.partial = partial
        self.soft = soft


def strip_reasoning(text: str) -> str:
    """An answer without the <think>...</think> block reasoning models (DeepSeek-R1, Qwen3) put first; an
    unclosed block is reasoning cut off before any answer."""
    text = _REASONING.sub("", text)
    closing = text.lower().rfind("</think>")  # reasoning whose opening tag the model (or server) left out
    return text[closing + len("</think>"):] if closing >= 0 else text


def extract_json_text(answer: str) -> str:
    """The JSON object inside an answer: inside a ``` fence if there is one, else from the first `{` to
    the last `}` (dropping prose before and after)."""
    answer = strip_reasoning(answer)
    fenced = _FENCE.search(answer)
    text = fenced.group(1) if fenced else answer
    start = text.find("{")
    if start < 0:
        raise ParseError("the answer contains no JSON object")
    if 0 <= text.find("[") < start and not text[:text.find("[")].strip(" \n\t`"):
        raise ParseError("the answer is a JSON list; a JSON object was asked for")
    end = text.rfind("}")
    if end < start:
        raise ParseError("the JSON object is cut off before its end")
    return text[start:end + 1]


def _unclosed(text: str) -> bool:
    """Whether the object's braces and brackets (outside strings) are left open at the end."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return depth > 0 or in_string


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if _unclosed(text):  # repairing would invent an end and silently drop what was cut off
            raise ParseError("the JSON object is cut off before its end") from None
        return json_repair.loads(text)  # small slips: trailing commas, single quotes, unquoted keys


def parse_json_object(answer: str) -> dict[str, Any]:
    value = _loads(extract_json_text(answer))
    if not isinstance(value, dict):
        raise ParseError("the answer is not a JSON object")
    return value


def parse_json_value(answer: str) -> dict[str, Any] | list[Any]:
    """A JSON object, or a list where the model answered with one (the caller decides what a list means)."""
    answer = strip_reasoning(answer)
    fenced = _FENCE.search(answer)
    text = (fenced.group(1) if fenced else answer).strip()
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start >= 0 and text[start] == "[":
        end = text.rfind("]")
        value = _loads(text[start:end + 1] if end > start else text[start:])
        if isinstance(value, list):
            return value
    return parse_json_object(answer)


def json_parser(model: type[M]) -> Callable[[str], M]:
    """A parser for the gateway: answer text -> validated pydantic model."""

    def parse(answer: str) -> M:
        data = parse_json_object(answer)
        try:
            return model.model_validate(data)
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in err.errors()[:5])
            raise ParseError(f"the JSON does not have the required fields ({problems})") from None

    return parse


def number_from_text(value: object, scale: float | None = None) -> object:
    """A number written as text the way models write it: "8", "8.5", "8/10", "85%", "Rating: 4/5". With
    `scale`, a fraction is rescaled to it ("4/5" on a 10 scale is 8)."""
    if not isinstance(value, str):
        return value
    found = re.search(r"(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?))?", value)
    if not found:
        return value
    number = float(found.group(1))
    if found.group(2) and scale is not None and float(found.group(2)) > 0:
        number = number / float(found.group(2)) * scale
    return number
