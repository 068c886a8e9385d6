"""Benchmark: evidence recall of local vs basic search on 5 long books (GraphRAG-Bench novels, no model).

    .venv/bin/python bench/novels_retrieval.py [--budget 12000] [--set local_search.KEY=VALUE]

The 5 books of ../shared/corpora/novels-dev are indexed together with `graphrag-lite index --method fast`
(300-token text units, keyword retrieval). Each of the 489 questions comes with evidence: paraphrased
sentences separated by "; ". An evidence sentence counts as found when one sentence of the context's source
text covers at least half of its content words (words of three letters or more, stopwords aside), which
tolerates the paraphrase. Scores per question: all evidence found, and the share found (item recall), for
local search and basic search packed to the same budget, by question type. A last row scores local
search's whole context (entity and relationship descriptions and reports too: the fast method's are
sentences of the text), which is what the answering model reads; basic search's context is its sources.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from retrieval_eval import Scores, compared_methods, score_question, whole_local_context, with_settings
from shared_data import shared_path

from graphrag_lite.evaluation.scoring import content_words, found_sentences
from graphrag_lite.query.engine import GraphRAG

DATA = shared_path("corpora/novels-dev")


def build(folder: Path) -> GraphRAG:
    (folder / "input").mkdir()
    for book in sorted((DATA / "books").glob("*.txt")):
        (folder / "input" / book.name).write_text(book.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "settings.yaml").write_text("embed_text:\n  model_id: null\nlocal_search:\n  embedding_model_id: null\n"
                                          "basic_search:\n  embedding_model_id: null\n")
    subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(folder), "--method", "fast"],
                   check=True, stdout=subprocess.DEVNULL)
    return GraphRAG.from_config(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=12000)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="local_search settings for the local run, e.g. --set ppr_damping=0.7")
    args = parser.parse_args()
    questions = json.loads((DATA / "questions.json").read_text())
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        index = build(Path(folder))
        built = time.perf_counter() - started
        overrides = {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.overrides)}
        rag = with_settings(index, local_search={"max_context_tokens": args.budget, **overrides})
        methods = {**compared_methods(rag), "local (ppr), whole context": (rag, whole_local_context)}
        scores = Scores()
        for q in questions:
            evidence = [e.strip() for e in q["evidence"].split("; ") if content_words(e)]
            score_question(scores, methods, q["question"], q["question_type"], set(range(len(evidence))),
                           lambda _, rows: found_sentences(evidence, (r["text"] for r in rows)))  # noqa: B023 - used at once
        print(f"fast index of the 5 books in {built:.1f} s: {len(index.index.text_units):,} text units, "
              f"{len(index.index.entities):,} entities, {len(index.index.communities):,} communities")
        scores.print(f"GraphRAG-Bench novels, {len(questions)} questions, {args.budget:,}-token context, keyword "
                     f"retrieval, no LLM (all-gold: every evidence sentence found; recall: share found; local "
                     f"settings {overrides or 'default'}):")


if __name__ == "__main__":
    main()
