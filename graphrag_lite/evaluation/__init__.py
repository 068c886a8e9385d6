"""Evaluation of an index against a question set: retrieval recall of gold evidence, answer scores, and
pairwise judging. Used by `graphrag-lite eval` (one index) and `graphrag-lite experiment` (many)."""
