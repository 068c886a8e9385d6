"""LanceDB tables of the index: vectors and a full-text index per table, keyed by the Parquet row ids.

Tables (GraphRAG's names): entity_description ("title:description"), text_unit_text, community_full_content.
A manifest in the output folder records the embedding model and dimension, so a query embedded with another
model is refused with the command that re-embeds, instead of returning nonsense.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import GraphragLiteError
from graphrag_lite.storage import read_json

MANIFEST = "embeddings_manifest.json"
TABLES = ("entity_description", "text_unit_text", "community_full_content")
REEMBED = "graphrag-lite index --from embed_text"


class IndexMismatchError(GraphragLiteError):
    exit_code = 2


def connect(uri: str) -> Any:
    import lancedb

    return lancedb.connect(uri)


def write_table(db: Any, name: str, ids: list[str], texts: list[str], vectors: list[list[float]] | None) -> None:
    columns: dict[str, Any] = {"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())}
    if vectors is not None:
        dimension = len(vectors[0]) if vectors else 0
        columns["vector"] = pa.array(vectors, pa.list_(pa.float32(), dimension))
    table = db.create_table(name, data=pa.table(columns), mode="overwrite")
    if ids:
        table.create_fts_index("text", replace=True)


def read_manifest(output_dir: Path) -> dict[str, Any] | None:
    path = output_dir / MANIFEST
    return read_json(path) if path.is_file() else None


def check_embedding_model(config: GraphRagConfig, model_id: str, dimension: int | None = None) -> dict[str, Any]:
    """The manifest, after checking the index was embedded with this model (and dimension)."""
    manifest = read_manifest(config.output.base_dir)
    if manifest is None:
        raise IndexMismatchError(f"no embeddings in {config.output.base_dir}; build them with `{REEMBED}`")
    model = config.models[model_id].model
    if manifest.get("model") is None:
        raise IndexMismatchError(f"the index has no vectors (built without an embedding model); configure "
                                 f"embed_text.model_id and run `{REEMBED}`, or search by keywords only")
    if manifest["model"] != model or (dimension is not None and manifest["dimension"] != dimension):
        raise IndexMismatchError(
            f"the index was embedded with {manifest['model']} ({manifest['dimension']} dimensions) but queries use "
            f"{model}{f' ({dimension} dimensions)' if dimension is not None else ''}; vectors of different models "
            f"cannot be compared. Re-embed with `{REEMBED}`, or set models.{model_id}.model back to "
            f"{manifest['model']}")
    return manifest


def texts_for(entities: pd.DataFrame, text_units: pd.DataFrame, reports: pd.DataFrame) -> dict[str, tuple[list, list]]:
    """(ids, texts) per LanceDB table; missing reports (failed) are left out."""
    present = reports[reports["full_content"].fillna("").str.len() > 0]
    return {
        "entity_description": (entities["id"].tolist(),
                               [f"{t}:{d}" for t, d in zip(entities["title"], entities["description"], strict=True)]),
        "text_unit_text": (text_units["id"].tolist(), text_units["text"].tolist()),
        "community_full_content": (present["id"].tolist(), present["full_content"].tolist()),
    }
