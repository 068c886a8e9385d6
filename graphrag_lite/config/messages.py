"""A validation problem as a message that names the key (and where its value was set), the closest valid key
for a typo, and the range or type expected."""

from __future__ import annotations

import difflib
import reprlib
import types
import typing
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ValidationError,
)
from pydantic_core import ErrorDetails

from graphrag_lite.config.model import GraphRagConfig

# where overrides come from, for messages: one label ("--set"), or a label per dotted key
OverrideSources = str | typing.Mapping[str, str]


def describe_validation_error(err: ValidationError, file: str, overridden: typing.Collection[str] = (),
                              overrides_from: OverrideSources = "--set") -> str:
    """One line per problem: where it comes from (the file, or the override that set the key), the dotted
    key, what was given, what is expected, and a suggestion for typos."""
    return describe_problems(err.errors(), file, overridden, overrides_from)


# problems listed in one message: a list of a thousand bad items needs its first few named, not all
MAX_PROBLEMS_LISTED = 20
# characters of a problem's line: its key and value are quoted cut short, and so is what a check says of them
MAX_LINE = 400


def describe_problems(problems: typing.Sequence[ErrorDetails], file: str, overridden: typing.Collection[str] = (),
                      overrides_from: OverrideSources = "--set") -> str:
    """describe_validation_error's lines for some of a ValidationError's problems."""
    lines = []
    for problem in problems[:MAX_PROBLEMS_LISTED]:
        loc = [str(part)[:60] for part in problem["loc"]]
        key = ".".join(loc)
        setter = _set_by(key, overridden)
        source = file if setter is None else overrides_from if isinstance(overrides_from, str) else \
            overrides_from.get(setter, file)
        given = problem.get("input")
        if problem["type"] == "extra_forbidden":
            inner, _ = _walk(GraphRagConfig, loc[:-1])
            valid = list(inner.model_fields) if inner is not None else []
            lines.append(f"{source}: unknown key '{key}'{suggest(loc[-1], valid, prefix=loc[:-1])}")
        elif problem["type"] == "value_error":  # a check of ours: its message says what is wrong and expected
            shown = "" if isinstance(given, dict) else f" = {quoted(given)}"  # a section's check names its keys
            lines.append(f"{source}: {key}{shown}: {problem['msg'].removeprefix('Value error, ')}")
        else:
            _, annotation = _walk(GraphRagConfig, loc)
            # a value of the right type out of its range: pydantic's message says the range; the type would mislead
            typed = annotation is not None and problem["type"] not in OUT_OF_RANGE
            expected = f" (expected {_type_name(annotation)})" if typed else ""
            lines.append(f"{source}: {key} = {quoted(given)}: {problem['msg']}{expected}")
    lines = [line if len(line) <= MAX_LINE else line[:MAX_LINE - 3] + "..." for line in lines]
    if len(problems) > MAX_PROBLEMS_LISTED:
        lines.append(f"... and {len(problems) - MAX_PROBLEMS_LISTED} more problems")
    return "\n".join(lines)


# a value as a message quotes it: its start, however big it is (a settings file's lists may be huge)
_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlevel = 100, 100, 2
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 4
MAX_QUOTED = 160


def quoted(value: Any) -> str:
    """repr(value), cut short: a message never quotes more than a short line of a value (reprlib stops early in
    a big value, so quoting one costs little)."""
    shown = _SHORT.repr(value)
    return shown if len(shown) <= MAX_QUOTED else shown[:MAX_QUOTED - 3] + "..."


# pydantic's error types for a value of the right type that breaks a bound of its field
OUT_OF_RANGE = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of",
                          "too_short", "too_long", "string_too_short", "string_too_long"})


def _set_by(key: str, overridden: typing.Collection[str]) -> str | None:
    """The override that set this key, or a section that holds it, or a key inside it; None if none did."""
    return next((o for o in overridden if key == o or key.startswith(o + ".") or o.startswith(key + ".")), None)


def suggest(name: str, valid: typing.Iterable[str], prefix: list[str] | None = None) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.5)
    return f"; did you mean '{'.'.join([*(prefix or []), close[0]])}'?" if close else ""


def _walk(model: type[BaseModel], loc: list[str]) -> tuple[type[BaseModel] | None, Any]:
    """Follow a validation-error location through the model classes: (innermost model, annotation)."""
    current: Any = model
    annotation: Any = None
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            if field is None:
                return None, None
            annotation = field.annotation
        elif typing.get_origin(current) is dict:  # a dict key such as a model id
            annotation = typing.get_args(current)[1]
        else:
            return None, annotation
        current = unwrap_optional(annotation)
    return (current if isinstance(current, type) and issubclass(current, BaseModel) else None), annotation


def unwrap_optional(annotation: Any) -> Any:
    """Optional[X] -> X."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if isinstance(annotation, type) and typing.get_origin(annotation) is None:
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("pathlib.", "").replace("pydantic.types.", "")
