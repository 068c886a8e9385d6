"""Pipelines: the stages a method runs, in order (pipelines/*.yaml, or a file of the project's), checked
against the stage registry the caller gives; and which pipeline built an index."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from graphrag_lite.commits import read_commit
from graphrag_lite.config.yaml_reading import parse_yaml, read_utf8_text
from graphrag_lite.errors import IndexDamaged, PipelineFileError
from graphrag_lite.pipeline.contract import Stage
from graphrag_lite.pipeline.records import built_with, last_run
from graphrag_lite.resources import data_dir


@dataclass
class Pipeline:
    name: str
    description: str
    stages: list[Stage]
    settings: dict[str, Any] = field(default_factory=dict)  # recommended settings, over settings.yaml
    source: str = ""  # the pipeline file, so `update` can run an index's own pipeline again


def load_pipeline(name_or_path: str, registry: Mapping[str, Stage], root: Path | None = None) -> Pipeline:
    """A pipeline file: `description:` and `stages:` (stage names, in order)."""
    path = _pipeline_path(name_or_path, root)
    try:
        data = parse_yaml(read_utf8_text(path), str(path)) or {}
    except yaml.YAMLError as err:
        raise PipelineFileError(f"{path}: not valid YAML: {str(err)[:400]}") from None
    if not isinstance(data, dict):
        raise PipelineFileError(f"{path}: expected a mapping with `stages:` (and `description:`, `settings:`)")
    names = data.get("stages")
    if not isinstance(names, list) or not names:
        raise PipelineFileError(f"{path}: expected a non-empty list under `stages:`")
    stages = []
    written: set[str] = set()
    for name in names:
        if name not in registry:
            close = difflib.get_close_matches(str(name), list(registry), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known stages: {', '.join(registry)}"
            raise PipelineFileError(f"{path}: unknown stage '{name}'{hint}")
        stage = registry[name]
        missing = [t for t in stage.reads if t not in written]
        if missing:
            raise PipelineFileError(f"{path}: stage '{name}' reads {missing}, which no earlier stage writes")
        twice = [t for t in stage.writes if t in written]
        if twice:
            raise PipelineFileError(f"{path}: stage '{name}' writes {twice}, already written by an earlier stage")
        written.update(stage.writes)
        stages.append(stage)
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise PipelineFileError(f"{path}: `settings:` must be a mapping of sections")
    return Pipeline(name=path.stem, description=str(data.get("description", "")), stages=stages, settings=settings,
                    source=str(path.resolve()))


QUERY_SECTIONS = ("local_search", "global_search", "basic_search")


def indexed_pipeline(output_dir: Path) -> tuple[str, str] | None:
    """The method the index in `output_dir` was built with: its name, and the name or pipeline file that runs
    it again (as its last run's stats.json says); None when there is no index there yet (no entities table)."""
    built = _built_with(output_dir) if (output_dir / "entities.parquet").is_file() else {}
    name, source = built.get("pipeline"), built.get("pipeline_file")
    if not isinstance(name, str):
        return None
    if name in available_pipelines() or not isinstance(source, str) or not Path(source).is_file():
        return name, name
    return name, source


def recommended_query_settings(output_dir: Path) -> dict[str, Any]:
    """The query sections of the `settings:` of the packaged pipeline that built the index in `output_dir`
    (stats.json names it), so an index is searched the way its method intends; {} when none apply."""
    name = _built_with(output_dir).get("pipeline")
    path = data_dir("pipelines") / f"{name}.yaml"
    if not isinstance(name, str) or not path.is_file():
        return {}
    settings = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("settings") or {}
    return {k: v for k, v in settings.items() if k in QUERY_SECTIONS}


def _built_with(output_dir: Path) -> dict[str, Any]:
    """The pipeline of the committed index (the last finished run's, for an index from before commits); {}
    when neither record can be read (a damaged one is reported by the commands that read the index)."""
    try:
        commit = read_commit(output_dir)
        return dict(commit.run) if commit is not None else built_with(last_run(output_dir))
    except IndexDamaged:
        return {}


def available_pipelines() -> list[str]:
    return sorted(p.stem for p in data_dir("pipelines").glob("*.yaml"))


def _pipeline_path(name_or_path: str, root: Path | None) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml"):
        path = candidate if candidate.is_absolute() or root is None else root / candidate
        if path.is_file():
            return path
        raise PipelineFileError(f"pipeline file {path} not found")
    path = data_dir("pipelines") / f"{name_or_path}.yaml"
    if path.is_file():
        return path
    known = available_pipelines()
    close = difflib.get_close_matches(name_or_path, known, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise PipelineFileError(f"unknown pipeline '{name_or_path}'; {hint}available: {', '.join(known)}")
