"""Stage embed_text: vectors and full-text indexes in LanceDB for entities, text units and reports.

Texts go to the embedding model through the gateway (batched by count and tokens, cached per text). With no
embedding model (embed_text.model_id: null, as in the fast method) the tables get full-text indexes only.
"""

from __future__ import annotations

import asyncio
import hashlib

import pandas as pd

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.pipeline import Stage, StageContext, StageResult
from graphrag_lite.storage import read_json, write_json
from graphrag_lite.vector_store import MANIFEST, TABLES, connect, texts_for, write_table


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.embed_text
    contents = texts_for(ctx.read("entities"), ctx.read("text_units"), ctx.read("community_reports"))
    db = connect(ctx.config.vector_store.db_uri)
    model = ctx.config.models[cfg.model_id].model if cfg.model_id else None
    dimension = None
    counts = {}
    for name in ctx.track(TABLES, len(TABLES), "LanceDB tables"):
        ids, texts = contents[name]
        vectors = None
        if cfg.model_id and texts:
            vectors = asyncio.run(ctx.llm.embed(cfg.model_id, texts, stage="embed_text", batch_size=cfg.batch_size,
                                                batch_max_tokens=cfg.batch_max_tokens))
            dimension = len(vectors[0])
        write_table(db, name, ids, texts, vectors)
        counts[name] = len(ids)
    manifest = {"model": model, "dimension": dimension, "db_uri": ctx.config.vector_store.db_uri, "tables": counts}
    write_json(ctx.config.output.base_dir / MANIFEST, manifest)
    what = f"vectors ({model}, {dimension} dimensions) and full-text indexes" if model else "full-text indexes only"
    return StageResult(
        tables={"embeddings": pd.DataFrame([{"table": t, "rows": n} for t, n in counts.items()])},
        summary=f"LanceDB {', '.join(f'{t} ({n})' for t, n in counts.items())}: {what}",
    )


def manifest_digest(config: GraphRagConfig) -> str | None:
    """Changes when the LanceDB side is gone or rewritten, so a resumed run rebuilds it."""
    path = config.output.base_dir / MANIFEST
    if not path.is_file():
        return None
    tables = read_json(path).get("tables", {})
    try:
        db = connect(config.vector_store.db_uri)
        found = {name: db.open_table(name).count_rows() for name in tables}
    except Exception:  # a table is missing or unreadable: not reusable
        return None
    return hashlib.blake2b(repr((path.read_bytes(), sorted(found.items()))).encode(), digest_size=16).hexdigest()


STAGE = Stage(
    name="embed_text",
    description="LanceDB tables with vectors and full-text indexes for entities, text units and reports",
    reads=("entities", "text_units", "community_reports"),
    writes=("embeddings",),
    config_sections=("embed_text", "vector_store"),
    run=run,
    uses_model=True,
    external_output_digest=manifest_digest,
)
