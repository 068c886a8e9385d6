"""Prompt files: the packaged defaults or a project's own, with `{name}` placeholders.

Only the placeholders a stage provides are replaced (not str.format), so braces elsewhere in a prompt,
such as a JSON example, need no escaping; a prompt without a placeholder the stage needs is an error.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from graphrag_lite.errors import ConfigError
from graphrag_lite.resources import default_prompt


def load_prompt(path: Path | None, default_name: str, required: tuple[str, ...] = ()) -> str:
    source = path or default_prompt(default_name)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"prompt file {source} cannot be read: {err.strerror or err}") from None
    missing = [name for name in required if "{" + name + "}" not in text]
    if missing:
        raise ConfigError(f"prompt file {source} has no {', '.join('{' + m + '}' for m in missing)} placeholder")
    return text


def prompt_file(section: BaseModel, key: str = "prompt") -> str:
    """The packaged prompt a section's prompt setting falls back to (config.prompt_field names it)."""
    extra = type(section).model_fields[key].json_schema_extra
    assert isinstance(extra, dict), f"{type(section).__name__}.{key} is not a prompt setting"
    return str(extra["prompt_file"])


def section_prompt(section: BaseModel, key: str = "prompt", required: tuple[str, ...] = ()) -> str:
    """The text of a section's prompt: the project's file, or the packaged default."""
    return load_prompt(getattr(section, key), prompt_file(section, key), required)


def fill(template: str, **values: object) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", str(value))
    return template
