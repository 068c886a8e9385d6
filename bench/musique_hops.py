"""Benchmark: what the multi-hop rounds of local search add on MuSiQue, with a real model (slow).

    .venv/bin/python bench/musique_hops.py --model openai/qwen --api-base http://127.0.0.1:8090/v1 [--questions 10]

The index is bench/musique_retrieval.py's (GPT-3.5 extractions, no model). For each question, local search
runs its retrieval rounds (`local_search.hops`, default here 2) with the model naming the missing link after
each round; no answer is generated. Prints, per question, the model's queries and whether all gold
paragraphs were in the context after round 1 and after the last round, then the totals, the extra calls and
tokens, and basic search packed to the same budget for comparison. Questions are taken in file order, after
those whose first round already holds every gold paragraph are skipped when --only-missed is given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from musique_retrieval import BUDGET, CORPUS, QUESTIONS, build_index, gold_paragraphs, paragraphs_of
from retrieval_eval import basic_rows, with_settings

from graphrag_lite.config import ModelConfig
from graphrag_lite.evaluation.evaluate import packed_basic
from graphrag_lite.query.engine import GraphRAG


def with_model(rag: GraphRAG, model: str, api_base: str | None, hops: int, hop_tokens: int) -> GraphRAG:
    config = rag.config.model_copy(deep=True)
    config.models["bench_chat_model"] = ModelConfig(model=model, api_base=api_base, api_key="sk-local",
                                                    concurrency=1, timeout=900)
    searcher = GraphRAG(config, use_cache=True)
    return with_settings(searcher, local_search={"chat_model_id": "bench_chat_model", "hops": hops,
                                                 "hop_context_tokens": hop_tokens})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-base")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--hops", type=int, default=2)
    parser.add_argument("--hop-context-tokens", type=int, default=2000)
    parser.add_argument("--only-missed", action="store_true", help="only questions whose first round misses gold")
    args = parser.parse_args()
    corpus = json.loads(CORPUS.read_text())
    by_text = {(c["title"], c["text"].strip()): i for i, c in enumerate(corpus)}
    with tempfile.TemporaryDirectory() as folder:
        index = build_index(Path(folder))
        rag = with_model(index, args.model, args.api_base, args.hops, args.hop_context_tokens)
        packed = packed_basic(index)
        totals = {"first": 0, "last": 0, "basic": 0, "asked": 0}
        began = time.perf_counter()
        for q in json.loads(QUESTIONS.read_text()):
            if totals["asked"] == args.questions:
                break
            gold = gold_paragraphs(q, by_text)
            first = gold <= paragraphs_of(rag, asyncio.run(rag.alocal_context(q["question"])).sources.rows)
            if args.only_missed and first:
                continue
            context, rounds = asyncio.run(rag.alocal_rounds(q["question"], 2, args.hops))
            last = gold <= paragraphs_of(rag, context.sources.rows)
            basic = gold <= paragraphs_of(packed, basic_rows(packed, q["question"]))
            for key, hit in (("first", first), ("last", last), ("basic", basic), ("asked", True)):
                totals[key] += hit
            print(f"{q['id'][:5]} {q['question'][:70]!r}: round 1 {'all gold' if first else 'missing'} -> "
                  f"{'all gold' if last else 'missing'} after {[r.query for r in rounds[1:]]}"
                  f"{' ' + str([p for r in rounds for p in r.problems]) if any(r.problems for r in rounds) else ''}",
                  flush=True)
        usage = rag.gateway.ledger.totals("query_local_hop")
        n = max(1, totals["asked"])
        print(f"{totals['asked']} questions, {BUDGET:,}-token context, model {args.model}, hops {args.hops}: "
              f"all-gold after round 1 {totals['first'] / n:.2f}, after the last round {totals['last'] / n:.2f}, "
              f"basic packed {totals['basic'] / n:.2f}; hop calls {usage['calls']} "
              f"({usage['prompt_tokens']:,} prompt + {usage['completion_tokens']:,} completion tokens), "
              f"{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
