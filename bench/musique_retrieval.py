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

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml
from musique_graph import DEFAULT, raw_tables, summarized
from retrieval_eval import Scores, compared_methods, score_question, with_settings

from graphrag_lite.config import GraphRagConfig, ModelConfig, OutputConfig, VectorStoreConfig
from graphrag_lite.graph.final_tables import finalize_graph
from graphrag_lite.graph.merge import merge_graph
from graphrag_lite.query.engine import GraphRAG
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
                          "document_id": [f"paragraph-{i}" for i in range(len(docs))]})
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


FAST_SETTINGS = ("input:\n  title_column: title\n  id_column: pid\n"
                 "embed_text:\n  model_id: null\nlocal_search:\n  embedding_model_id: null\n"
                 "basic_search:\n  embedding_model_id: null\n")


def fast_project_files() -> dict[str, str]:
    """The project of the fast index: the paragraphs (title and text, as HippoRAG gives them), one document
    each with its paragraph id, and settings for keyword search only."""
    docs = json.loads(DEFAULT.read_text())["docs"]
    paragraphs = "".join(json.dumps({"pid": f"paragraph-{i}", "title": doc["title"], "text": doc["passage"]}) + "\n"
                         for i, doc in enumerate(docs))
    return {"input/paragraphs.jsonl": paragraphs, "settings.yaml": FAST_SETTINGS}


def build_fast_index(folder: Path) -> GraphRAG:
    """`graphrag-lite index --method fast` over the same paragraphs: rule-based entities, keyword search only."""
    for name, text in fast_project_files().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(folder), "--method", "fast"],
                   check=True, stdout=subprocess.DEVNULL)
    return GraphRAG.from_config(folder)


def gold_paragraphs(question: dict, by_text: dict[tuple[str, str], int]) -> set[str]:
    return {f"paragraph-{by_text[(p['title'], p['paragraph_text'].strip())]}" for p in question["paragraphs"]
            if p["is_supporting"]}


def paragraphs_of(rag: GraphRAG, rows: list[dict]) -> set[str]:
    """The paragraphs (documents) whose text units are among the context's sources."""
    document_of = dict(zip(rag.index.text_units["human_readable_id"], rag.index.text_units["document_id"],
                           strict=True))
    return {document_of[row["id"]] for row in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", choices=["standard", "fast"], default="standard")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="local_search settings for the local run, e.g. --set ppr_damping=0.7")
    args = parser.parse_args()
    corpus = json.loads(CORPUS.read_text())
    by_text = {(c["title"], c["text"].strip()): i for i, c in enumerate(corpus)}
    questions = json.loads(QUESTIONS.read_text())
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        rag = (build_index if args.method == "standard" else build_fast_index)(Path(folder))
        overrides = {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.overrides)}
        rag = with_settings(rag, local_search=overrides)
        print(f"{args.method} index: {len(rag.index.text_units):,} text units, {len(rag.index.entities):,} "
              f"entities, {len(rag.index.communities):,} communities (built in {time.perf_counter() - started:.1f} s)")
        began = time.perf_counter()
        rag.index.entity_unit_graph  # noqa: B018 - built once per query process, timed apart from the queries
        print(f"entity-text unit graph for the walk: {rag.index.entity_unit_graph.transitions.nodes:,} nodes, "
              f"{len(rag.index.entity_unit_graph.transitions.sources) // 2:,} edges, built in "
              f"{(time.perf_counter() - began) * 1000:.0f} ms")
        methods = compared_methods(rag)
        scores = Scores()
        for q in questions:
            score_question(scores, methods, q["question"], f"{q['id'][0]} hops", gold_paragraphs(q, by_text),
                           paragraphs_of)
        scores.print(f"MuSiQue, {len(questions)} questions, {BUDGET:,}-token context, no LLM "
                     f"({args.method} index; local settings {overrides or 'default'}):")


if __name__ == "__main__":
    main()
