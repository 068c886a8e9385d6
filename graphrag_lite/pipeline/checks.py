"""Before any stage runs: what a run is told once (a GraphRAG settings file's ignored keys) and what must
hold before the first model call (every model the stages will call has a usable key)."""

from __future__ import annotations

from rich.console import Console

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import ConfigError
from graphrag_lite.llm.providers import key_problem, no_key_choices
from graphrag_lite.pipeline.contract import Stage


def print_compat_notes(config: GraphRagConfig, console: Console, brief: bool = False) -> None:
    """Once per command: a Microsoft GraphRAG settings file's keys that are accepted but ignored, and why
    (`brief`, for each query: how many, and where the list is)."""
    if config.compat_notes:
        console.print(f"[yellow]note:[/yellow] a Microsoft GraphRAG settings file, read as graphrag-lite settings; "
                      f"{len(config.compat_notes)} of its keys are ignored or read otherwise here"
                      + (" (`graphrag-lite index` lists them as it starts)" if brief else ":"), highlight=False)
        for note in config.compat_notes if not brief else []:
            console.print(f"  {note}", highlight=False, markup=False)


def check_model_keys(config: GraphRagConfig, stages: list[Stage]) -> None:
    """Before any stage runs: every model the stages to run will call has a usable key (not init's
    placeholder, not missing where the provider needs one), else a ConfigError that says what to do."""
    for stage in (s for s in stages if needs_model(s, config)):
        own = getattr(config, stage.config_sections[0])
        for key in ("model_id", "chat_model_id", "embedding_model_id"):
            model_id = getattr(own, key, None)
            model = config.models.get(model_id) if isinstance(model_id, str) else None
            if model is not None and (problem := key_problem(model)) is not None:
                raise ConfigError(f"{stage.config_sections[0]}.{key} '{model_id}' ({model.model}), used by "
                                  f"{stage.name}: {problem}; {no_key_choices(config.root_dir)}")


def needs_model(stage: Stage, config: GraphRagConfig) -> bool:
    """Whether the stage calls a model as configured: not when its own section (the first it reads) is
    disabled, names no model (extract_claims.enabled: false, embed_text.model_id: null) or leaves the model
    out (entity_resolution.confirm_with_model: false)."""
    if not stage.uses_model or not stage.config_sections:
        return stage.uses_model
    own = getattr(config, stage.config_sections[0])
    if getattr(own, "enabled", True) is False or getattr(own, "confirm_with_model", True) is False:
        return False
    ids = [getattr(own, key) for key in ("model_id", "chat_model_id", "embedding_model_id") if hasattr(own, key)]
    return not ids or any(model_id is not None for model_id in ids)
