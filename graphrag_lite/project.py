"""`graphrag-lite init`: a new project folder with settings.yaml, .env, input/ and the prompt files."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from pydantic import BaseModel, SecretStr

from graphrag_lite.config import GraphRagConfig, render_settings_yaml
from graphrag_lite.errors import ConfigError
from graphrag_lite.resources import data_dir

SETTINGS_HEADER = """\
# graphrag-lite settings. Every key is optional; the values shown are the defaults.
# ${NAME} reads an environment variable (or one from .env beside this file); $$ is a literal $.
# Override any key on the command line: graphrag-lite index --set chunking.size=300
"""

ENV_TEMPLATE = """\
# Secrets for settings.yaml; never commit this file.
GRAPHRAG_API_KEY=<your-api-key>
"""


def project_config() -> GraphRagConfig:
    """The configuration `init` writes: the defaults, with the API key read from GRAPHRAG_API_KEY and every
    prompt setting naming its copy in prompts/, so an edited copy is the prompt used."""
    config = GraphRagConfig()
    for model in config.models.values():
        model.api_key = SecretStr("${GRAPHRAG_API_KEY}")
    for (section, setting), file in prompt_settings().items():
        setattr(getattr(config, section), setting, Path("prompts") / file)
    return config


def prompt_settings() -> dict[tuple[str, str], str]:
    """(section, setting) -> the packaged prompt file it falls back to, for every prompt setting."""
    found = {}
    for section, field in GraphRagConfig.model_fields.items():
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            for setting, inner in model.model_fields.items():
                extra = inner.json_schema_extra
                if isinstance(extra, dict) and "prompt_file" in extra:
                    found[(section, setting)] = str(extra["prompt_file"])
    return found


def init_project(root: Path, force: bool = False) -> list[Path]:
    """Write the project files into `root`; refuses to replace existing ones unless `force`."""
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root} is a file, not a folder: give the project's folder (graphrag-lite init "
                          f"{shlex.quote(str(root.parent))})")
    wired = set(prompt_settings().values()) | {"README.md"}
    prompts = sorted(p for p in data_dir("prompts").iterdir() if p.is_file() and p.name in wired)
    targets = [root / "settings.yaml", root / ".env"] + [root / "prompts" / p.name for p in prompts]
    existing = [t for t in targets if t.exists()]
    if existing and not force:
        names = ", ".join(str(t.relative_to(root)) for t in existing)
        raise ConfigError(f"{root} already has {names}; use --force to overwrite")
    (root / "input").mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    (root / "settings.yaml").write_text(render_settings_yaml(project_config(), SETTINGS_HEADER), encoding="utf-8")
    (root / ".env").write_text(ENV_TEMPLATE, encoding="utf-8")
    for prompt in prompts:
        shutil.copyfile(prompt, root / "prompts" / prompt.name)
    return [*targets, root / "input"]
