"""The Python API beside the query engine (`GraphRAG`): build an index, run an experiment.

    from graphrag_lite import build_index, run_experiment
    summary = build_index("my-project", {"chunking.size": 300}, method="fast")
    results = run_experiment("experiments/example.yaml")   # a pandas DataFrame
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from graphrag_lite.config import GraphRagConfig, Overrides, apply_overrides
from graphrag_lite.errors import ConfigError
from graphrag_lite.pipeline.definition import load_pipeline
from graphrag_lite.pipeline.runner import RunSummary, run_pipeline
from graphrag_lite.pipeline.settings import configure
from graphrag_lite.stages import STAGES


def build_index(config: str | Path | GraphRagConfig = ".", overrides: Overrides = (), method: str | None = None,
                console: Console | None = None) -> RunSummary:
    """Build (or resume) an index. `config` is a project folder, a settings file, or a GraphRagConfig;
    `overrides` are `--set` strings or a mapping of dotted keys; `method` a pipeline name or file (default:
    the settings' `pipeline`). A folder or file gets the pipeline's recommended settings under the overrides,
    as `graphrag-lite index` does; a GraphRagConfig is taken as it is. Unchanged stages are skipped."""
    if isinstance(config, GraphRagConfig):
        data = config.model_dump(mode="python", exclude={"root_dir"})
        data["models"] = {k: {**m, "api_key": config.models[k].api_key} for k, m in data["models"].items()}
        apply_overrides(data, overrides)
        try:
            cfg = GraphRagConfig.model_validate(data)
        except ValueError as err:
            raise ConfigError(f"build_index overrides: {err}") from None
        cfg.root_dir, cfg.settings_file = config.root_dir, config.settings_file
        pipeline = load_pipeline(method or cfg.pipeline, STAGES, cfg.root_dir)
    else:
        path = Path(config)
        root, settings = (path.parent, path) if path.is_file() else (path, None)
        cfg, pipeline = configure(STAGES, root, settings, overrides, method)
    return run_pipeline(cfg, pipeline, console or Console(quiet=True))
