"""Benchmark: retrieval recall of local vs basic search on HotpotQA-100 with the fast method (no model).

    .venv/bin/python bench/hotpotqa_fast_retrieval.py

The 994 Wikipedia paragraphs are indexed with `graphrag-lite index --method fast` (one document per paragraph,
titled by the article). For each of the 100 questions the local and basic contexts are built as the query
commands build them (keyword retrieval: the fast index has no vectors), within the same 12,000 tokens.
Recall = share of questions whose supporting articles all appear among the context's source text units.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from graphrag_lite.query.context import pack
from graphrag_lite.query.engine import GraphRAG
from graphrag_lite.query.local import build_local_context, name_matches
from graphrag_lite.query.retrieval import by_keywords, fuse
from graphrag_lite.vector_store import connect

DATA = Path(__file__).resolve().parents[2] / "shared/corpora/hotpotqa-100"
BUDGET = 12000


def sources_titles(rag: GraphRAG, rows: list[dict]) -> set[str]:
    units = rag.index.text_units.set_index("human_readable_id")
    titles = dict(zip(rag.index.documents["id"], rag.index.documents["title"], strict=True))
    return {titles[units.loc[row["id"], "document_id"]] for row in rows}


def local_rows(rag: GraphRAG, question: str) -> list[dict]:
    cfg = rag.config.local_search
    db = connect(rag.config.vector_store.db_uri)
    linked = fuse([name_matches(rag.index, question),
                   by_keywords(db, "entity_description", question, cfg.top_k_entities * 3)], cfg.top_k_entities)
    units = by_keywords(db, "text_unit_text", question, cfg.retrieved_text_units)
    context = build_local_context(rag.index, cfg, linked, 2, units)
    return [row for table in context.tables if table.name == "Sources" for row in table.rows]


def basic_rows(rag: GraphRAG, question: str, k: int) -> list[dict]:
    db = connect(rag.config.vector_store.db_uri)
    found = by_keywords(db, "text_unit_text", question, k)
    units = rag.index.text_units.set_index("id", drop=False).loc[found]
    rows = [{"id": int(h), "text": t} for h, t in zip(units["human_readable_id"], units["text"], strict=True)]
    return pack("Sources", ["id", "text"], rows, BUDGET).rows


def main() -> None:
    corpus = json.loads((DATA / "corpus.json").read_text())
    questions = json.loads((DATA / "questions.json").read_text())
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "input").mkdir()
        with open(root / "input" / "paragraphs.jsonl", "w") as out:
            for title, sentences in corpus.items():
                out.write(json.dumps({"title": title, "text": "".join(sentences)}) + "\n")
        (root / "settings.yaml").write_text("input:\n  title_column: title\nembed_text:\n  model_id: null\n"
                                            "local_search:\n  embedding_model_id: null\n")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--method", "fast"],
                       check=True, stdout=subprocess.DEVNULL)
        built = time.perf_counter() - started
        rag = GraphRAG.from_config(root)
        hits = {"local": 0, "basic k=10": 0, "basic filled to the budget": 0}
        for q in questions:
            gold = {title for title, _ in q["supporting_facts"]}
            hits["local"] += gold <= sources_titles(rag, local_rows(rag, q["question"]))
            hits["basic k=10"] += gold <= sources_titles(rag, basic_rows(rag, q["question"], 10))
            hits["basic filled to the budget"] += gold <= sources_titles(rag, basic_rows(rag, q["question"], 200))
        print(f"fast index of {len(corpus)} paragraphs in {built:.1f} s: {len(rag.index.entities):,} entities, "
              f"{len(rag.index.communities):,} communities")
        print(f"retrieval recall (all supporting articles in the context), {len(questions)} questions, "
              f"{BUDGET:,}-token budget, keyword retrieval:")
        for name, n in hits.items():
            print(f"  {name:28s} {n / len(questions):.2f}")


if __name__ == "__main__":
    main()
