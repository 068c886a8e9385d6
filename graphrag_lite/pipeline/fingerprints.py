"""Whether a stage must run again: its fingerprint (name, package version, configuration slice, the digests
of the tables it reads, what it reads from outside the output folder) against the one its last successful
run recorded, and its outputs as that run left them."""

from __future__ import annotations

from typing import Any

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.ids import json_digest
from graphrag_lite.pipeline.contract import Stage
from graphrag_lite.pipeline.definition import Pipeline
from graphrag_lite.storage import OutputStore
from graphrag_lite.version import __version__


def stage_fingerprint(stage: Stage, config: GraphRagConfig, digests: dict[str, str]) -> str:
    payload = {
        "stage": stage.name,
        "version": __version__,
        "config": config.section_fingerprint(stage.config_sections),
        "inputs": {name: digests.get(name) for name in stage.reads},
        "external": stage.external_digest(config) if stage.external_digest else None,
    }
    return json_digest(payload, 16)


def reusable_prefix(pipeline: Pipeline, config: GraphRagConfig, store: OutputStore, state: dict[str, Any],
                     rerun_from: int) -> int:
    """How many leading stages can be reused as they are (their outputs are hashed once, here)."""
    digests: dict[str, str] = {}
    for position, stage in enumerate(pipeline.stages):
        previous = state.get(stage.name, {})
        if position >= rerun_from or not is_reusable(previous, stage_fingerprint(stage, config, digests), store, stage,
                                                   config):
            return position
        digests.update(previous["outputs"])
    return len(pipeline.stages)


def is_reusable(previous: dict[str, Any], fingerprint: str, store: OutputStore, stage: Stage,
              config: GraphRagConfig) -> bool:
    if previous.get("fingerprint") != fingerprint:
        return False
    if previous.get("external") != outside_outputs_digest(stage, config):
        return False
    return all(store.digest(name) == digest for name, digest in previous.get("outputs", {}).items())


def outside_outputs_digest(stage: Stage, config: GraphRagConfig) -> str | None:
    return stage.external_output_digest(config) if stage.external_output_digest else None
