"""Stage embed_text: full-text indexes in LanceDB for entities, text units and reports, and vectors for the
tables `embed_text.names` lists (by default those searches read: entities and text units).

Texts go to the embedding model through the gateway (batched by count and tokens, cached per text). With no
embedding model (embed_text.model_id: null, as in the fast method) the tables get full-text indexes only.

A re-run updates the tables in place: only the texts of new or changed rows are embedded (even with the
answer cache off), unchanged rows keep their stored vectors, and rows that are gone are deleted. When the
manifest names another embedding model, or the model now returns vectors of another dimension, every table is
rebuilt and re-embedded: vectors of two models are never mixed in one index.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from graphrag_lite.commits import read_commit
from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import IndexDamaged
from graphrag_lite.estimate import CallEstimate
from graphrag_lite.large_imports import import_large
from graphrag_lite.llm.calls import gather_all
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.storage import write_json
from graphrag_lite.vector_store import (
    MANIFEST,
    TABLES,
    TableUpdate,
    apply_update,
    connect,
    damage,
    plan_update,
    read_manifest,
    texts_for,
)


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.embed_text
    model = ctx.config.models[cfg.model_id].model if cfg.model_id else None
    contents, vectorized, manifest, dimension = inputs(ctx)
    damaged = set_damaged_aside(ctx)
    db, known = ctx.run(connected(ctx, contents, vectorized, dimension))
    updates = plan(db, contents, dimension, vectorized, rebuild=dimension is None, damaged=damaged)
    vectors = embed_added(ctx, contents, updates, known, dimension, vectorized)
    fresh = next((len(v[0]) for v in vectors.values() if v), None)
    if fresh is not None and fresh != dimension and not all(updates[n].rebuilt for n in vectorized):
        # same model name, other vectors (e.g. its `dimensions` call argument changed): start again
        added = added_texts(contents, updates, vectorized)
        known = {t: v for n in vectorized for t, v in zip(added[n], vectors[n] or [], strict=True)}
        updates = plan(db, contents, None, vectorized, rebuild=True)
        vectors = embed_added(ctx, contents, updates, known, fresh, vectorized)
    if model is not None:
        dimension = fresh if fresh is not None else dimension
    for name in ctx.track(TABLES, len(TABLES), "LanceDB tables"):
        apply_update(db, name, contents[name], updates[name], vectors[name])
    counts = {name: contents[name].num_rows for name in TABLES}
    first = manifest is None
    write_json(ctx.config.output.base_dir / MANIFEST,
               {"model": model, "dimension": dimension, "db_uri": ctx.config.lancedb_uri,
                "db_uri_from_output": from_output(ctx.config), "tables": counts, "vectors": vectorized})
    what = (f"vectors of {', '.join(vectorized)} ({model}, {dimension} dimensions), full-text indexes of all"
            if vectorized else "full-text indexes only")
    return StageResult(
        tables={"embeddings": pd.DataFrame([{"table": t, "rows": n} for t, n in counts.items()])},
        summary=f"LanceDB {', '.join(describe(t, n, updates[t], first) for t, n in counts.items())}: {what}",
        details={name: update.counts() for name, update in updates.items()},
    )


def vector_tables(config: GraphRagConfig) -> list[str]:
    """The LanceDB tables that get vectors (none without an embedding model)."""
    return [name for name in TABLES if name in config.embed_text.names] if config.embed_text.model_id else []


def inputs(ctx: StageContext) -> tuple[dict[str, pa.Table], list[str], dict[str, Any] | None, int | None]:
    """What a run (or a dry run's estimate) works from: each table's rows (id, text), the tables with vectors,
    the manifest, and the stored vectors' dimension when they can be kept (None: every vector is made again).
    The texts stay in Arrow (not their lists of ids): only those sent to the model become Python strings."""
    contents = texts_for(ctx.read_arrow("entities", ["id", "title", "description"]),
                         ctx.read_arrow("text_units", ["id", "text"]),
                         ctx.read_arrow("community_reports", ["id", "full_content"]))
    manifest = readable_manifest(ctx.config, ctx.notes)
    return contents, vector_tables(ctx.config), manifest, reusable_dimension(manifest, ctx.config)


def readable_manifest(config: GraphRagConfig, notes: list[str] | None = None) -> dict[str, Any] | None:
    """The embeddings manifest the last run left; a damaged one is taken as absent (every table is rebuilt,
    its vectors from the answer cache), and said in `notes`."""
    try:
        return read_manifest(config.output.base_dir)
    except IndexDamaged as err:
        if notes is not None:
            notes.append(f"{err}: taken as absent, so every LanceDB table is rebuilt (its vectors from the answer "
                         "cache)")
        return None


async def connected(ctx: StageContext, contents: dict[str, pa.Table], vectorized: list[str],
                    dimension: int | None) -> tuple[Any, dict[str, list[float]]]:
    """LanceDB's connection, and, when no stored vector can be kept (a first build, another model), the
    vectors of every text of the tables with vectors: all of them are sent whatever LanceDB holds, so the
    calls go out while LanceDB is imported (about 0.7 s) in a thread, not after it. The text units' vectors
    were asked for right after chunking (`early`); the texts it did not bring are sent now."""
    opening = asyncio.to_thread(connect, ctx.config.lancedb_uri)
    model_id = ctx.config.embed_text.model_id
    if dimension is not None or not vectorized or model_id is None:
        return await opening, {}
    texts = list(dict.fromkeys(t for name in vectorized for t in contents[name]["text"].to_pylist()))
    early = await early_vectors(ctx.early())  # long done, but for a stage reached while it is still in flight
    rest = [t for t in texts if t not in early]
    # the calls' own preparation (cache keys, token counts) first: against an import that holds the GIL, each
    # token count, which lets it go, would wait for it again
    vectors, db = await gather_all([embedded(ctx, rest, None), opening])
    known = {**early, **dict(zip(rest, vectors, strict=True))}
    # the early work and this turn are two calls: a vector of another size than what the model returns now was
    # cached from a former model of the same name, and is asked again (one index, one model's vectors)
    size = ctx.llm.returned_dimension.get(model_id)
    stale = [t for t in texts if size is not None and len(known[t]) != size]
    if stale:
        known.update(zip(stale, await embedded(ctx, stale, size), strict=True))
    return db, known


def early(ctx: StageContext) -> Coroutine[Any, Any, dict[str, list[float]]] | None:
    """The text units' vectors, asked for right after chunking: they are most of what this stage embeds, and
    the embedding model is idle while the graph is extracted. Only when every text would be sent anyway (a
    first build, another model: no stored vector is kept); an update embeds just its new rows, at its turn."""
    if "text_unit_text" not in vector_tables(ctx.config) or reusable_dimension(
            readable_manifest(ctx.config), ctx.config) is not None:
        return None
    return vectors_by_text(ctx, list(dict.fromkeys(ctx.read("base_text_units", ["text"])["text"])))


async def vectors_by_text(ctx: StageContext, texts: list[str]) -> dict[str, list[float]]:
    """The early work's result: taken by text at the stage's turn, whatever else it then sends. LanceDB is then
    imported too, in a thread: about 1 s that would otherwise come at the stage's turn, on the run's critical
    path, and here falls in the graph's extraction, which mostly waits for the model."""
    vectors = await embedded(ctx, texts, None)
    await asyncio.to_thread(import_large, "lancedb")
    return dict(zip(texts, vectors, strict=True))


async def early_vectors(task: asyncio.Task[dict[str, list[float]]] | None) -> dict[str, list[float]]:
    """The early work's vectors by text; none when there was none, or when it failed (the runner logged why,
    and the ledger counts its failed calls): those texts are sent at the stage's turn, where an error that
    lasts stops the run."""
    if task is None:
        return {}
    try:
        return await task
    except Exception:
        return {}


async def embedded(ctx: StageContext, texts: list[str], dimension: int | None) -> list[list[float]]:
    """The vectors of `texts`, in order, from the stage's embedding model (`dimension`: see Gateway.embed)."""
    cfg = ctx.config.embed_text
    assert cfg.model_id is not None
    return await ctx.llm.embed(cfg.model_id, texts, stage="embed_text", batch_size=cfg.batch_size,
                               batch_max_tokens=cfg.batch_max_tokens, dimension=dimension)


def estimate(ctx: StageContext) -> CallEstimate | None:
    """The texts a run would embed: new or changed rows of the tables with vectors, not already cached."""
    cfg = ctx.config.embed_text
    if cfg.model_id is None or not vector_tables(ctx.config):
        return None
    contents, vectorized, _, dimension = inputs(ctx)
    updates = plan(connect(ctx.config.lancedb_uri), contents, dimension, vectorized, rebuild=dimension is None)
    texts = list(dict.fromkeys(t for added in added_texts(contents, updates, vectorized).values() for t in added))
    calls, sent, tokens = ctx.llm.embedding_estimate(cfg.model_id, texts, cfg.batch_size, cfg.batch_max_tokens,
                                                     dimension)
    return CallEstimate(stage="embed_text", model_id=cfg.model_id, calls=calls, extra_calls=0, prompt_tokens=tokens,
                        completion_tokens=0, extra_prompt_tokens=0,
                        note=f"{len(texts)} new or changed texts of {', '.join(vectorized)}, {sent} of them not in "
                             "the answer cache")


def reusable_dimension(manifest: dict[str, Any] | None, config: GraphRagConfig) -> int | None:
    """The dimension of the stored vectors when they can be kept: the manifest names this embedding model and
    this LanceDB (by its place, or by where it lies from the output folder: a project moved or copied whole
    keeps its vectors); None otherwise (and always without a model: the tables then have no vectors)."""
    model_id = config.embed_text.model_id
    if model_id is None or manifest is None or manifest.get("model") != config.models[model_id].model:
        return None
    here = from_output(config)
    same = manifest.get("db_uri") == config.lancedb_uri or (here and manifest.get("db_uri_from_output") == here)
    return manifest.get("dimension") if same else None


def from_output(config: GraphRagConfig) -> str | None:
    """Where a local LanceDB lies from the output folder (None for a remote one)."""
    uri = config.lancedb_uri
    return None if "://" in uri else os.path.relpath(uri, config.output.base_dir)


def plan(db: Any, contents: dict[str, pa.Table], dimension: int | None, vectorized: list[str],
         rebuild: bool, damaged: frozenset[str] = frozenset()) -> dict[str, TableUpdate]:
    """Each table's update; only the `vectorized` tables have vectors (a table that gains or loses them is
    recreated)."""
    return {name: plan_update(db, name, contents[name], dimension if name in vectorized else None,
                              rebuild=(rebuild and name in vectorized) or name in damaged) for name in TABLES}


def added_texts(contents: dict[str, pa.Table], updates: dict[str, TableUpdate],
                names: list[str]) -> dict[str, list[str]]:
    """The texts of the rows each table of `names` adds: what a run embeds, and what a dry run estimates."""
    return {n: updates[n].added(contents[n])["text"].to_pylist() for n in names}


def embed_added(ctx: StageContext, contents: dict[str, pa.Table], updates: dict[str, TableUpdate],
                known: dict[str, list[float]], dimension: int | None,
                vectorized: list[str]) -> dict[str, list[list[float]] | None]:
    """Vectors of the rows each `vectorized` table adds (None for the other tables), in one gateway call so
    they all have one dimension (`dimension`, when known, also sets cached vectors of another size aside);
    `known`: vectors already in hand, by text, not sent again."""
    cfg = ctx.config.embed_text
    wanted = added_texts(contents, updates, vectorized)
    missing = list(dict.fromkeys(t for texts in wanted.values() for t in texts if t not in known))
    if missing and cfg.model_id:
        fresh = ctx.run(embedded(ctx, missing, dimension))
        known = {**known, **dict(zip(missing, fresh, strict=True))}
    return {n: [known[t] for t in wanted[n]] if n in wanted else None for n in TABLES}


def describe(table: str, rows: int, update: TableUpdate, first: bool) -> str:
    """"entity_description (120: 3 added, 1 removed)"; just the rows on a first build."""
    if update.rebuilt:
        return f"{table} ({rows})" if first else f"{table} ({rows}: rebuilt)"
    changes = [f"{n} {what}" for n, what in ((len(update.add), "added"), (len(update.remove), "removed")) if n]
    return f"{table} ({rows}: {', '.join(changes) or 'unchanged'})"


def set_damaged_aside(ctx: StageContext) -> frozenset[str]:
    """The LanceDB tables that are damaged (`damaged_tables`), said in the run's notes; each is rebuilt whole as
    a new version (its vectors from the answer cache), so the versions a commit pins stay for its readers. A
    table too damaged to be opened is deleted first (its pinned version is then unreadable anyway)."""
    damaged = damaged_tables(ctx.config)
    uri = ctx.config.lancedb_uri
    for name, problem in damaged.items():
        ctx.notes.append(f"{problem}: the table is rebuilt (its vectors from the answer cache)")
        folder = Path(uri) / f"{name}.lance"
        if "://" not in uri and folder.is_dir() and _latest_version(connect(uri), name) is None:
            shutil.rmtree(folder)
    return frozenset(damaged)


def damaged_tables(config: GraphRagConfig) -> dict[str, str]:
    """The LanceDB tables the manifest names that cannot be used as they are: their files changed since the
    commit that pinned their version, a file their version needs is gone, or they cannot be read whole."""
    manifest = readable_manifest(config)
    if manifest is None:
        return {}
    uri = config.lancedb_uri
    try:
        commit = read_commit(config.output.base_dir)
    except IndexDamaged:
        commit = None
    pinned = (commit.lancedb or {}).get("tables", {}) if commit is not None else {}
    try:
        db = connect(uri)
        present = set(db.list_tables().tables)
    except Exception as err:  # the database itself cannot be opened: every table is rebuilt
        return {name: f"LanceDB at {uri} cannot be opened ({type(err).__name__}: {err})" for name in TABLES}
    wanted = {}
    for name in manifest.get("tables", {}):
        if name not in present:
            continue  # missing: plan_update recreates it
        entry = pinned.get(name, {})
        latest = _latest_version(db, name)
        # the pinned version is checked against the commit; a later one (an interrupted run's) only for being
        # readable whole: its rows are that run's, which plan_update brings to what this run wants
        wanted[name] = entry if latest is not None and entry.get("version") == latest else {
            "version": latest if latest is not None else -1}
    return damage(uri, {"tables": wanted}, probe=True)


def _latest_version(db: Any, name: str) -> int | None:
    try:
        return int(db.open_table(name).version)
    except Exception:  # unreadable: damage() says so when it probes it
        return None


def manifest_digest(config: GraphRagConfig) -> str | None:
    """Changes when the LanceDB side is gone, damaged or rewritten, so a resumed run rebuilds it."""
    path = config.output.base_dir / MANIFEST
    manifest = readable_manifest(config)
    if manifest is None or damaged_tables(config):
        return None
    try:
        db = connect(config.lancedb_uri)
        found = {name: (db.open_table(name).count_rows(), _latest_version(db, name)) for name in manifest["tables"]}
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
    estimate=estimate,
    early=early,
    early_reads=("base_text_units",),
)
