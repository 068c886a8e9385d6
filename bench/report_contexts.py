"""Benchmark: build every community report context of the MuSiQue graph (no LLM calls).

    .venv/bin/python bench/report_contexts.py [--max-input-length 8000]

The graph comes from HippoRAG's GPT-3.5 extractions (as in bench/musique_graph.py). Contexts are built
level by level, deepest first, as the community_reports stage does; each written "report" is a stand-in (the
community's entity titles), since no model is called. Prints the time to count the rows once and to pack
every context, and how many contexts needed sub-community reports or were cut.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
from musique_graph import DEFAULT, raw_tables, summarized

from graphrag_lite.graph.final_tables import finalize_graph
from graphrag_lite.graph.merge import merge_graph
from graphrag_lite.graph.report_context import ChildReport, ContextBuilder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-input-length", type=int, default=8000)
    args = parser.parse_args()
    merged = merge_graph(*raw_tables(DEFAULT))
    entities, relationships, communities = finalize_graph(summarized(merged.entities), summarized(merged.relationships),
                                                          10, 0xDEADBEEF, True)
    claims = pd.DataFrame(columns=["human_readable_id", "subject_id", "type", "status", "description"])
    started = time.perf_counter()
    builder = ContextBuilder(entities, relationships, claims, args.max_input_length)
    counted = time.perf_counter()
    titles = dict(zip(entities["id"], entities["title"], strict=True))
    written: dict[int, ChildReport] = {}
    substituted = cut = 0
    tokens = []
    for level in sorted(communities["level"].unique(), reverse=True):
        for row in communities[communities["level"] == level].itertuples():
            children = [written[int(c)] for c in row.children if int(c) in written]
            context = builder.build(list(row.entity_ids), list(row.relationship_ids), children)
            substituted += bool(context.substituted)
            cut += context.truncated
            tokens.append(context.tokens)
            stand_in = "Community of " + ", ".join(titles[e] for e in list(row.entity_ids)[:20])
            written[int(row.community)] = ChildReport(int(row.community), int(row.size), frozenset(row.entity_ids),
                                                      builder.report_row(int(row.community), "stand-in", stand_in))
    packed = time.perf_counter()
    print(f"graph: {len(entities):,} entities, {len(relationships):,} relationships, {len(communities):,} communities")
    print(f"rows counted once: {counted - started:.2f} s; all {len(communities):,} contexts packed: "
          f"{packed - counted:.2f} s (max_input_length {args.max_input_length:,})")
    print(f"contexts using sub-community reports: {substituted}; cut to fit: {cut}; "
          f"largest context {max(tokens):,} tokens, median {sorted(tokens)[len(tokens) // 2]:,}")


if __name__ == "__main__":
    main()
