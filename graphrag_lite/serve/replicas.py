"""`graphrag-lite serve --workers N`: N server processes (uvicorn's workers) on one port, each a stateless
replica that loads the committed index and follows new commits on its own (serve/holder.py): over an index
on object storage, each pulls a new commit into the shared working copy (files appear whole, index.json
last) and swaps it in. The workers are started by uvicorn from an import string, so what each needs (the
project, settings file and --set values) goes to them in the environment; the API key too, in the variable
the command line already reads it from."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from fastapi import FastAPI

from graphrag_lite.config import load_config
from graphrag_lite.pipeline.committed import open_committed
from graphrag_lite.serve.app import check_binding, check_port, create_app
from graphrag_lite.serve.holder import IndexHolder

REPLICA_ARGS = "GRAPHRAG_LITE_REPLICA"
API_KEY = "GRAPHRAG_LITE_API_KEY"


def run_replicas(root: Path, config: Path | None, overrides: list[str], host: str, port: int,
                 api_key: str | None, workers: int) -> None:
    import uvicorn

    check_binding(host, api_key)
    check_port(host, port)
    started = time.perf_counter()
    cfg = load_config(root, config, overrides)
    open_committed(cfg.output.base_dir, cfg.root_dir)  # no index, or a damaged one: said once, here
    os.environ[REPLICA_ARGS] = json.dumps({"root": str(root), "config": str(config) if config else None,
                                           "overrides": overrides})
    if api_key:
        os.environ[API_KEY] = api_key
    where = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"index in {cfg.output.remote or cfg.output.base_dir} found in "
                     f"{time.perf_counter() - started:.1f} s; {workers} workers loading it, serving on "
                     f"http://{where}:{port}\n")
    uvicorn.run("graphrag_lite.serve.replicas:replica_app", factory=True, workers=workers, host=host, port=port,
                log_level="warning")


def replica_app() -> FastAPI:
    """One worker's app: its own holder of the committed index, following new commits."""
    args = json.loads(os.environ[REPLICA_ARGS])
    holder = IndexHolder(Path(args["root"]), Path(args["config"]) if args["config"] else None, args["overrides"])
    return create_app(holder, os.environ.get(API_KEY))
