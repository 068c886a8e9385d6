"""Benchmark: local vs basic search retrieval on MuSiQue (50 multi-hop questions, 1,890 paragraphs).

    .venv/bin/python bench/musique_retrieval.py

An index is built from HippoRAG's cached GPT-3.5 extractions with no chat model: one text unit per paragraph,
the merge, resolution and Leiden stages as in bench/musique_graph.py, stand-in community reports (entity
titles; no LLM), and LanceDB tables embedded by the offline fake embedder (hashed words and trigrams, so
vector search here is lexical). For each question, the local and basic search contexts are built exactly as
the query commands build them (no answer is generated), both within 12,000 tokens. Prints the median and p95
time to build a local context, and retrieval recall: the share of questions whose gold (is_supporting)
paragraphs are all among the context's source text units.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
from musique_graph import DEFAULT, raw_tables, summarized

from graphrag_lite.config import GraphRagConfig, ModelConfig, OutputConfig, VectorStoreConfig
from graphrag_lite.graph.merge import merge_graph
from graphrag_lite.query.context import pack
from graphrag_lite.query.engine import GraphRAG
from graphrag_lite.query.local import build_local_context, name_matches
from graphrag_lite.query.retrieval import by_keywords, by_vector, fuse
from graphrag_lite.stages.cluster_graph import finalize_graph
from graphrag_lite.stages.finalize_text_units import finalize
from graphrag_lite.storage import OutputStore, write_json
from graphrag_lite.tokens import count_tokens
from graphrag_lite.vector_store import MANIFEST, TABLES, connect, texts_for, write_table

CORPUS = DEFAULT.parent / "corpus.json"
QUESTIONS = DEFAULT.parent / "questions.json"
BUDGET = 12000


def build_index(folder: Path) -> GraphRAG:
    config = GraphRagConfig(
        models={"default_chat_model": ModelConfig(model="fake/default"),
                "default_embedding_model": ModelConfig(model="fake/embedding?dim=256")},
        output=OutputConfig(base_dir=folder), vector_store=VectorStoreConfig(db_uri=str(folder / "lancedb")))
    docs = json.loads(DEFAULT.read_text())["docs"]
    units = pd.DataFrame({"id": [f"paragraph-{i}" for i in range(len(docs))], "human_readable_id": range(len(docs)),
                          "text": [d["passage"] for d in docs],
                          "n_tokens": [count_tokens(d["passage"], "o200k_base") for d in docs],
                          "document_id": [f"document-{i}" for i in range(len(docs))]})
    merged = merge_graph(*raw_tables(DEFAULT))
    entities, relationships, communities = finalize_graph(summarized(merged.entities),
                                                          summarized(merged.relationships), 10, 0xDEADBEEF, True)
    claims = pd.DataFrame(columns=["text_unit_id", "subject", "object", "type", "status", "start_date", "end_date",
                                   "description", "source_text"])
    text_units, covariates = finalize(units, entities, relationships, claims, merged.aliases)
    titles = dict(zip(entities["id"], entities["title"], strict=True))
    reports = pd.DataFrame([{
        "id": f"report-{c.community}", "community": c.community, "level": c.level, "status": "ok",
        "title": ", ".join(titles[e] for e in list(c.entity_ids)[:3]),
        "summary": "Entities: " + ", ".join(titles[e] for e in list(c.entity_ids)[:30]),
        "full_content": "Entities: " + ", ".join(titles[e] for e in c.entity_ids), "rank": min(10.0, c.size / 5),
    } for c in communities.itertuples()])
    store = OutputStore(folder)
    for name, table in (("text_units", text_units), ("entities", entities), ("relationships", relationships),
                        ("communities", communities), ("community_reports", reports), ("covariates", covariates)):
        store.write(name, table)
    rag = GraphRAG(config)
    db = connect(config.vector_store.db_uri)
    for name, (ids, texts) in texts_for(entities, text_units, reports).items():
        vectors = asyncio.run(rag.gateway.embed("default_embedding_model", texts, stage="bench", batch_size=512,
                                                batch_max_tokens=10**6))
        write_table(db, name, ids, texts, vectors)
    write_json(folder / MANIFEST, {"model": "fake/embedding?dim=256", "dimension": 256,
                                   "tables": {t: len(texts_for(entities, text_units, reports)[t][0]) for t in TABLES}})
    return rag


def gold_units(question: dict, by_text: dict[tuple[str, str], int]) -> set[int]:
    return {by_text[(p["title"], p["paragraph_text"].strip())] for p in question["paragraphs"] if p["is_supporting"]}


def local_sources(rag: GraphRAG, question: str, vector: list[float]) -> set[int]:
    cfg = rag.config.local_search
    db = connect(rag.config.vector_store.db_uri)
    rankings = [name_matches(rag.index, question),
                by_keywords(db, "entity_description", question, cfg.top_k_entities * 3),
                by_vector(db, "entity_description", vector, cfg.top_k_entities * 3)]
    n = cfg.retrieved_text_units
    units = fuse([by_vector(db, "text_unit_text", vector, n), by_keywords(db, "text_unit_text", question, n)], n)
    context = build_local_context(rag.index, cfg, fuse(rankings, cfg.top_k_entities), 2, units)
    return {row["id"] for table in context.tables if table.name == "Sources" for row in table.rows}


def basic_sources(rag: GraphRAG, question: str, vector: list[float], k: int) -> set[int]:
    db = connect(rag.config.vector_store.db_uri)
    found = fuse([by_vector(db, "text_unit_text", vector, k), by_keywords(db, "text_unit_text", question, k)], k)
    units = rag.index.text_units.set_index("id", drop=False).loc[found]
    rows = [{"id": int(h), "text": t} for h, t in zip(units["human_readable_id"], units["text"], strict=True)]
    return {row["id"] for row in pack("Sources", ["id", "text"], rows, BUDGET).rows}


def main() -> None:
    corpus = json.loads(CORPUS.read_text())
    by_text = {(c["title"], c["text"].strip()): i for i, c in enumerate(corpus)}
    questions = json.loads(QUESTIONS.read_text())
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        rag = build_index(Path(folder))
        built = time.perf_counter() - started
        print(f"index: {len(rag.index.text_units):,} text units, {len(rag.index.entities):,} entities, "
              f"{len(rag.index.communities):,} communities (built and embedded in {built:.1f} s)")
        latencies, local_hits, basic_hits, basic_budget_hits = [], 0, 0, 0
        for q in questions:
            gold = gold_units(q, by_text)
            began = time.perf_counter()  # the local context's latency includes embedding the question
            vector = asyncio.run(rag.embed_question("default_embedding_model", q["question"]))
            local = local_sources(rag, q["question"], vector)
            latencies.append(time.perf_counter() - began)
            local_hits += gold <= local
            basic_hits += gold <= basic_sources(rag, q["question"], vector, rag.config.basic_search.k)
            basic_budget_hits += gold <= basic_sources(rag, q["question"], vector, 200)
        latencies.sort()
        n = len(questions)
        print(f"local context build: median {statistics.median(latencies) * 1000:.0f} ms, "
              f"p95 {latencies[int(0.95 * (n - 1))] * 1000:.0f} ms (question embedding + retrieval + packing)")
        print(f"retrieval recall (all gold paragraphs in the context), {n} questions, {BUDGET:,}-token budget:")
        print(f"  local search (sources get 50% of the budget): {local_hits / n:.2f}")
        print(f"  basic search, k=10 (the default):            {basic_hits / n:.2f}")
        print(f"  basic search, filled to the budget:          {basic_budget_hits / n:.2f}")


if __name__ == "__main__":
    main()
