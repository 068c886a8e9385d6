"""Stage chunk_text: every document split into token windows (`text_units`, documents/chunking.py), numbered
as the last run numbered them, and the `documents` table with each document's text units.
"""

from __future__ import annotations

import pandas as pd

from graphrag_lite.documents.chunking import chunk_documents
from graphrag_lite.ids import kept_numbers
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.tables import INDEX_TABLES


def run(ctx: StageContext) -> StageResult:
    documents = ctx.read("input_documents")
    cfg = ctx.config.chunking
    text_units = chunk_documents(documents, cfg)
    previous = ctx.previous_numbers("base_text_units")
    text_units["human_readable_id"] = kept_numbers(text_units["id"], previous)
    # in the order of their numbers, so a renamed or moved document leaves the table as it was (a first run's
    # are in order already: not copied)
    if not text_units["human_readable_id"].is_monotonic_increasing:
        text_units = text_units.sort_values("human_readable_id", kind="stable").reset_index(drop=True)
    new = int((~text_units["id"].isin(set(previous or {}))).sum())
    removed = len(set(previous or {}) - set(text_units["id"]))
    unit_ids = text_units.groupby("document_id", sort=False)["id"].agg(list)
    final_documents = documents.assign(text_unit_ids=pd.Series(
        [unit_ids.get(doc_id, []) for doc_id in documents["id"]], index=documents.index, dtype=object))
    final_documents = final_documents[list(INDEX_TABLES["documents"])]  # GraphRAG's column order
    tokens = int(text_units["n_tokens"].sum())
    # a unit longer than chunking.size took the short tail after it (chunking.min_tail_tokens)
    joined = int((text_units["n_tokens"] > cfg.size).sum())
    tails = f"; {joined} took the short tail after them (min_tail_tokens {cfg.min_tail_tokens})" if joined else ""
    return StageResult(
        tables={"base_text_units": text_units, "documents": final_documents},
        summary=f"{len(documents)} documents -> {len(text_units)} text units ({tokens:,} tokens, "
                f"size {cfg.size}, overlap {cfg.overlap}, {cfg.encoding_model}){tails}",
        details={"tokens": tokens, "tails_joined": joined,
                 **({"new_text_units": new, "removed_text_units": removed} if previous else {})},
    )


STAGE = Stage(
    name="chunk_text",
    description="split documents into token windows (text units)",
    reads=("input_documents",),
    writes=("base_text_units", "documents"),
    config_sections=("chunking",),
    run=run,
)
