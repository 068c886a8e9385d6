"""Prompt files: the packaged defaults or a project's own, with `{name}` placeholders.

Only the placeholders a stage provides are replaced (not str.format), so braces elsewhere in a prompt,
such as a JSON example, need no escaping; a prompt without a placeholder the stage needs is an error.
"""

from __future__ import annotations

from pathlib import Path

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


def fill(template: str, **values: object) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", str(value))
    return template
