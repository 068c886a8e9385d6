"""The settings of an index run: the settings file, under the settings its pipeline recommends, under
`--set`; and settings.effective.yaml, the settings a run used, written beside the index."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from graphrag_lite.compat import is_graphrag_settings
from graphrag_lite.compat import translate as translate_graphrag_settings
from graphrag_lite.config import (
    GraphRagConfig,
    Overrides,
    OverrideSources,
    override_items,
    read_settings,
    resolve_config,
)
from graphrag_lite.pipeline.contract import Stage
from graphrag_lite.pipeline.definition import Pipeline, load_pipeline

EFFECTIVE_SETTINGS_FILE = "settings.effective.yaml"


def configure(registry: Mapping[str, Stage], root: Path, config_file: Path | None = None, overrides: Overrides = (),
              method: str | None = None, overrides_from: OverrideSources = "--set") -> tuple[GraphRagConfig, Pipeline]:
    """The settings and the pipeline of an index run: the settings file, under the settings the pipeline
    recommends (`method`, else the file's `pipeline`), under `overrides`; the pipeline's stages from
    `registry` (stages.STAGES)."""
    # the pipeline's name comes first, unvalidated: its settings may be what makes the rest valid
    path, data = read_settings(root, config_file)
    named = [value for key, value in override_items(overrides) if key == ["pipeline"]]
    name = method or (named[-1] if named else data.get("pipeline")) or GraphRagConfig.model_fields["pipeline"].default
    pipeline = load_pipeline(str(name), registry, path.parent)
    cfg = resolve_config(path, data, overrides, pipeline.settings or None, overrides_from)
    # what runs, also when --method chose it (a pipeline file by its full path): settings.effective.yaml runs it again
    cfg.pipeline = pipeline.name if str(name) == pipeline.name else pipeline.source
    return cfg, pipeline


def write_effective_settings(config: GraphRagConfig, pipeline: Pipeline, output_dir: Path) -> None:
    """The settings a run uses, every value resolved (the settings file, the pipeline's settings, --set), beside
    the index: what built it, to compare runs or to build it again. An API key is written as the ${VAR} the
    settings file reads it from, else as asterisks (which a run refuses as a placeholder)."""
    values = _dollars_literal(config.model_dump(mode="json", exclude={"root_dir"}))
    written = yaml.safe_load(config.settings_file.read_text(encoding="utf-8")) if config.settings_file else None
    if isinstance(written, dict) and is_graphrag_settings(written):  # its keys where ours are, ${VAR}s kept
        written = translate_graphrag_settings(written)[0]
    for model_id, model in values["models"].items():
        if model["api_key"] is not None and (reference := _key_reference(written, model_id)):
            model["api_key"] = reference
    for name in ("input", "cache", "output"):  # on object storage: the URI, not this machine's working copy
        if (remote := getattr(config, name).remote) is not None:
            values[name]["base_dir"] = remote
    if config.output.remote is not None and config.vector_store.db_uri == str(config.output.base_dir / "lancedb"):
        values["vector_store"]["db_uri"] = None  # inside the working copy, wherever that is
    header = (f"# The settings of the last index run in this folder ({time.strftime('%Y-%m-%d %H:%M:%S')}, pipeline "
              f"{pipeline.name}): {config.settings_file or 'settings given in code'} under the pipeline's settings, "
              "under --set.\n"
              "# Usable as a settings file; API keys are the ${VAR}s they were read from, or hidden (put them "
              "back).\n")
    text = header + yaml.safe_dump(values, sort_keys=False, allow_unicode=True)
    (output_dir / EFFECTIVE_SETTINGS_FILE).write_text(text, encoding="utf-8")


def _dollars_literal(value: Any) -> Any:
    """Resolved values written so that reading the file back gives them again: a `$` as `$$`."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {k: _dollars_literal(v) for k, v in value.items()}
    return [_dollars_literal(v) for v in value] if isinstance(value, list) else value


def _key_reference(settings: Any, model_id: str) -> str | None:
    """The ${VAR} a settings file's model reads its API key from, if it does."""
    models = settings.get("models") if isinstance(settings, dict) else None
    model = models.get(model_id) if isinstance(models, dict) else None
    key = model.get("api_key") if isinstance(model, dict) else None
    return key if isinstance(key, str) and "${" in key else None
