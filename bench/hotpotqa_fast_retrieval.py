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

from retrieval_eval import Scores, compared_methods, score_question
from shared_data import shared_path

from graphrag_lite.query.engine import GraphRAG

DATA = shared_path("corpora/hotpotqa-100")
BUDGET = 12000


def sources_titles(rag: GraphRAG, rows: list[dict]) -> set[str]:
    units = rag.index.text_units.set_index("human_readable_id")
    titles = dict(zip(rag.index.documents["id"], rag.index.documents["title"], strict=True))
    return {titles[units.loc[row["id"], "document_id"]] for row in rows}


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
                                            "local_search:\n  embedding_model_id: null\n"
                                            "basic_search:\n  embedding_model_id: null\n")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--method", "fast"],
                       check=True, stdout=subprocess.DEVNULL)
        built = time.perf_counter() - started
        rag = GraphRAG.from_config(root)
        methods = compared_methods(rag)
        scores = Scores()
        for q in questions:
            score_question(scores, methods, q["question"], q["type"], {title for title, _ in q["supporting_facts"]},
                           sources_titles)
        print(f"fast index of {len(corpus)} paragraphs in {built:.1f} s: {len(rag.index.entities):,} entities, "
              f"{len(rag.index.communities):,} communities")
        scores.print(f"HotpotQA, {len(questions)} questions, {BUDGET:,}-token context, keyword retrieval, no LLM "
                     "(all-gold: every supporting article in the context):")


if __name__ == "__main__":
    main()
