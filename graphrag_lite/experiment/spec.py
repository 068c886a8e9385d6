"""The experiment file: which project, which variants of its settings, which questions and query methods,
and an optional judge. Validated like settings.yaml: unknown keys are named with the closest valid one.

    project: ..                  # folder of settings.yaml and input (relative to this file); default: here
    output: example-results      # default: <file name>-results beside this file
    base: {pipeline: fast}       # overrides for every variant: dotted keys, exactly what --set accepts
    variants:                    # named variants: overrides over base
      chunks-200: {chunking.size: 200}
    grid:                        # and/or the cross product of lists of values
      chunking.size: [200, 300]
      extract_graph_nlp.min_count: [1, 2]
    questions: questions.jsonl   # optional; see graphrag_lite/evaluation/questions.py
    methods: [local, basic]      # query methods evaluated (basic search packed to local's budget is added)
    answers: false               # true: generate answers with the chat model and score them
    judge: {baseline: chunks-200, methods: [local]}
    budget: {max_cost_usd: 5}    # for the whole experiment
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from graphrag_lite.config import unwrap_optional, yaml_mapping
from graphrag_lite.config.yaml_reading import read_utf8_text
from graphrag_lite.errors import ConfigError
from graphrag_lite.evaluation.judge import CRITERIA
from graphrag_lite.query import SearchMethod

# Where each variant's index and cache live is the experiment's business, not a variant's.
RESERVED = ("output.base_dir", "vector_store.db_uri")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JudgeSpec(_Strict):
    baseline: str = Field(description="the variant every other variant's answers are compared with")
    model_id: str = Field("default_chat_model", description="the judge: a model id of the project's settings")
    methods: list[SearchMethod] = Field(default_factory=lambda: list[SearchMethod](["local"]),
                                  description="query methods whose answers are judged")
    criteria: list[str] = Field(default_factory=lambda: list(CRITERIA), description="criteria; the four of the "
                                "GraphRAG paper by default, or your own words")
    prompt: Path | None = Field(None, description="judge prompt file; unset: the packaged one")


class BudgetSpec(_Strict):
    max_cost_usd: float | None = Field(None, gt=0, description="stop the experiment once its model calls cost "
                                       "this much (finished work is kept)")


class ExperimentSpec(_Strict):
    project: Path = Path(".")
    settings: Path | None = None
    output: Path | None = None
    base: dict[str, Any] = Field(default_factory=dict)
    variants: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    questions: Path | None = None
    methods: list[SearchMethod] = Field(default_factory=lambda: list[SearchMethod](["local", "basic"]))
    answers: bool = Field(False, description="generate answers with each method's chat model and score them "
                          "(questions with answers); a judge needs them too. Off: retrieval scores only, no model")
    response_type: str = "Single Sentence"
    judge: JudgeSpec | None = None
    budget: BudgetSpec = Field(default_factory=BudgetSpec)

    @field_validator("grid", mode="before")
    @classmethod
    def _lists(cls, grid: Any) -> Any:
        if isinstance(grid, dict):
            return {k: v if isinstance(v, list) else [v] for k, v in grid.items()}
        return grid


@dataclass(frozen=True)
class Variant:
    name: str
    overrides: dict[str, Any]  # dotted key -> value: base, then the variant's own
    own: dict[str, Any]  # the variant's own overrides (what sets it apart)
    sources: dict[str, str]  # dotted key -> where the file sets it, for messages


def load_spec(path: Path) -> ExperimentSpec:
    text = read_utf8_text(path)
    data = yaml_mapping(text, path, "(project, base, variants, grid, questions, ...)")
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError("\n".join(_describe(path, problem) for problem in err.errors())) from None
    folder = path.parent
    spec.project = (folder / spec.project).resolve()
    spec.output = (folder / (spec.output or f"{path.stem}-results")).resolve()
    spec.settings = (folder / spec.settings).resolve() if spec.settings else None
    spec.questions = (folder / spec.questions).resolve() if spec.questions else None
    if spec.judge and spec.judge.prompt:
        spec.judge.prompt = (folder / spec.judge.prompt).resolve()
    return spec


def expand_variants(spec: ExperimentSpec, path: Path) -> list[Variant]:
    """Named variants, then one per point of the grid, each with base under its own overrides."""
    base = flatten(spec.base, path, "base")
    own: dict[str, dict[str, Any]] = {name: flatten(values or {}, path, f"variant '{name}'")
                                      for name, values in spec.variants.items()}
    named = set(own)
    for key, values in spec.grid.items():
        if not values:
            raise ConfigError(f"{path}: grid entry '{key}' has no values; give a list of at least one value")
    keys = list(spec.grid)
    for point in itertools.product(*(spec.grid[k] for k in keys)) if keys else []:
        combined = dict(zip(keys, point, strict=True))
        name = grid_name(combined)
        if name in own:
            raise ConfigError(f"{path}: two variants would be named '{name}' (grid names keep only letters, digits "
                              "and dots of each value); rename the named variant, or make the grid values differ")
        own[name] = combined
    if not own:
        raise ConfigError(f"{path}: defines no variants; add `variants:` (named overrides) or `grid:` (lists of "
                          "values to combine)")
    for name, settings in [("base", base), *((f"variant '{n}'", v) for n, v in own.items())]:
        for key in settings:
            if key in RESERVED:
                raise ConfigError(f"{path}: {name}: '{key}' is set by the experiment (each index gets its own "
                                  "folder under the experiment's output); remove it")
    return [Variant(name, {**base, **settings}, settings, {
        **{key: f"{path}: base" for key in base},
        **{key: f"{path}, variant '{name}'" if name in named else f"{path}: grid entry '{key}'" for key in settings}})
        for name, settings in own.items()]


def flatten(values: dict[str, Any], path: Path, where: str, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys: {chunking: {size: 300}} and {chunking.size: 300} mean the same."""
    flat: dict[str, Any] = {}
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: {where}: expected a mapping of settings to values, got {values!r}")
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, path, where, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def grid_name(values: dict[str, Any]) -> str:
    """`chunking.size=300, extract_graph_nlp.min_count=2` -> `size-300_min_count-2` (a key's last part,
    unless two keys end alike)."""
    lasts = [k.split(".")[-1] for k in values]
    parts = []
    for key, value in values.items():
        label = key.split(".")[-1] if lasts.count(key.split(".")[-1]) == 1 else key.replace(".", "-")
        parts.append(f"{label}-{re.sub(r'[^A-Za-z0-9.]+', '', str(value)) or 'none'}")
    return "_".join(parts)


def _describe(path: Path, problem: Any) -> str:
    loc = [str(p) for p in problem["loc"]]
    key = ".".join(loc)
    if problem["type"] == "extra_forbidden":
        model: Any = ExperimentSpec
        for part in loc[:-1]:
            field = getattr(model, "model_fields", {}).get(part)
            model = unwrap_optional(field.annotation) if field is not None else None
        fields = list(getattr(model, "model_fields", {}))
        close = difflib.get_close_matches(loc[-1], fields, n=1, cutoff=0.5)
        hint = f"; did you mean '{'.'.join([*loc[:-1], close[0]])}'?" if close else \
            (f"; known keys: {', '.join(fields)}" if fields else "")
        return f"{path}: unknown key '{key}'{hint}"
    if problem["type"] == "missing":
        return f"{path}: '{key}' is required and missing"
    return f"{path}: {key} = {problem.get('input')!r}: {problem['msg']}"
