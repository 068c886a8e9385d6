"""A configuration written as settings.yaml: every key with its default and its description as a comment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    SecretStr,
)

from graphrag_lite.config.model import GraphRagConfig


def render_settings_yaml(cfg: GraphRagConfig, header: str = "") -> str:
    """settings.yaml text for a config: every key with its value and its description as a comment.
    Unset optional keys are written commented out, so users see what they can set."""
    lines = [header.rstrip() + "\n"] if header else []
    for name, field in type(cfg).model_fields.items():
        if field.exclude:
            continue
        value = getattr(cfg, name)
        if isinstance(value, BaseModel):
            lines.append(f"\n{name}:")
            lines.extend(_render_fields(value, indent=1))
        elif name == "models":
            lines.append(f"\n# {field.description}\nmodels:")
            for model_id, model in value.items():
                lines.append(f"  {model_id}:")
                lines.extend(_render_fields(model, indent=2, only_set=True))
        else:
            lines.append(f"# {field.description}\n{name}: {_yaml_value(value)}")
    return "\n".join(lines) + "\n"


def _render_fields(model: BaseModel, indent: int, only_set: bool = False) -> list[str]:
    pad = "  " * indent
    lines = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if field.exclude or (only_set and name not in model.model_fields_set):
            continue
        comment = f"  # {field.description}" if field.description else ""
        if value is None:
            lines.append(f"{pad}# {name}:{comment}")
        else:
            lines.append(f"{pad}{name}: {_yaml_value(value)}{comment}")
    return lines


def _yaml_value(value: Any) -> str:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, Path):
        value = value.as_posix()
    if isinstance(value, str) and value.startswith("${"):
        return value  # an environment reference stays unquoted and readable
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("\n...").strip()
