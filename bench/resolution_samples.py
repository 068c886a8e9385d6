"""Benchmark: what entity resolution merges in real extractions, for a reader to check (issue 13).

    .venv/bin/python bench/resolution_samples.py musique [--sample 20] [--seed 0]
    .venv/bin/python bench/resolution_samples.py dulce
    .venv/bin/python bench/resolution_samples.py index OUTPUT_DIR

Sources:
- musique: HippoRAG's GPT-3.5 OpenIE extractions of 1,890 Wikipedia paragraphs (bench/musique_graph.py's
  raw tables; no entity types, so only normalization and the spelling rule can fire);
- dulce: Microsoft GraphRAG's own index of Operation Dulce (GPT-4 extractions; GraphRAG merges only
  identical names, so its entities are the extracted names), one record per entity and text unit;
- index: the raw_entities and raw_relationships of any graphrag-lite index (a real model's, or the fast
  method's).
Prints the records, the names after normalization, the merges by reason, the names left apart as
ambiguous, and a seeded sample of the merges a rule made (normalization aside), each with the evidence that
allowed it and the first description on each side, so a reader can judge every merge.
"""

from __future__ import annotations

import argparse
import textwrap
from collections import defaultdict
from pathlib import Path

import pandas as pd
from musique_graph import DEFAULT as MUSIQUE
from musique_graph import raw_tables
from shared_data import shared_path

from graphrag_lite.alias_overrides import NORMALIZED
from graphrag_lite.graph.merge import merge_graph
from graphrag_lite.names import normalize_name


def dulce_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    folder = shared_path("corpora/operation-dulce/reference_output_v2")
    entities = pd.read_parquet(folder / "entities.parquet")
    relationships = pd.read_parquet(folder / "relationships.parquet")
    raw_entities = [(unit, row.title, row.type, row.description) for row in entities.itertuples()
                    for unit in row.text_unit_ids]
    raw_relationships = [(unit, row.source, row.target, row.description, row.weight)
                         for row in relationships.itertuples() for unit in row.text_unit_ids]
    return (pd.DataFrame(raw_entities, columns=["text_unit_id", "name", "type", "description"]),
            pd.DataFrame(raw_relationships, columns=["text_unit_id", "source", "target", "description", "strength"]))


def index_tables(output: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(output / "raw_entities.parquet"), pd.read_parquet(output / "raw_relationships.parquet")


def evidence_between(raw_entities: pd.DataFrame, raw_relationships: pd.DataFrame, a: str, b: str) -> str:
    units: dict[str, set[str]] = defaultdict(set)
    for name, unit in zip(raw_entities["name"], raw_entities["text_unit_id"], strict=True):
        units[normalize_name(name)].add(unit)
    neighbours: dict[str, set[str]] = defaultdict(set)
    for s, t in zip(raw_relationships["source"], raw_relationships["target"], strict=True):
        neighbours[normalize_name(s)].add(normalize_name(t))
        neighbours[normalize_name(t)].add(normalize_name(s))
    ka, kb = normalize_name(a), normalize_name(b)
    shared_units, shared_neighbours = units[ka] & units[kb], neighbours[ka] & (neighbours[kb] | {kb})
    parts = [f"{len(shared_units)} shared text units"] if shared_units else []
    if shared_neighbours:
        parts.append("neighbours " + ", ".join(sorted(shared_neighbours)[:3]))
    return "; ".join(parts) or "none"


def first_description(raw_entities: pd.DataFrame, name: str) -> str:
    key = normalize_name(name)
    rows = raw_entities[raw_entities["name"].map(normalize_name) == key]
    text = next((d for d in rows["description"] if isinstance(d, str) and d), "")
    return textwrap.shorten(text, 110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", choices=("musique", "dulce", "index"))
    parser.add_argument("output", nargs="?", type=Path, help="an index's output folder (source: index)")
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.source == "musique":
        raw_entities, raw_relationships = raw_tables(MUSIQUE)
    elif args.source == "dulce":
        raw_entities, raw_relationships = dulce_tables()
    elif args.output is None:
        raise SystemExit("source index needs the index's output folder")
    else:
        raw_entities, raw_relationships = index_tables(args.output)
    merged = merge_graph(raw_entities, raw_relationships)
    c = merged.counts
    print(f"{args.source}: {c['raw_entity_records']:,} entity records -> {c['names_after_normalization']:,} names "
          f"-> {c['entities']:,} entities; {c['merged_as_aliases']:,} names merged by a rule, "
          f"{c['ambiguous_names_left_apart']:,} left apart as ambiguous")
    ruled = merged.aliases[merged.aliases["reason"] != NORMALIZED]
    ruled = ruled[~ruled["alias"].map(normalize_name).duplicated()]
    print("merges by reason: " + "; ".join(f"{r} {n}" for r, n in ruled["reason"].value_counts().items()))
    picked = ruled.sample(n=min(args.sample, len(ruled)), random_state=args.seed).sort_values("title")
    print(f"\n{len(picked)} merges drawn at random (seed {args.seed}):")
    for number, row in enumerate(picked.itertuples(), start=1):
        print(f"{number:2}. {row.alias} -> {row.title}  [{row.reason}; evidence: "
              f"{evidence_between(raw_entities, raw_relationships, row.alias, row.title)}]")
        print(f"    {row.alias}: {first_description(raw_entities, row.alias)}")
        print(f"    {row.title}: {first_description(raw_entities, row.title)}")
    if len(merged.ambiguous_aliases):
        print("\nleft apart as ambiguous (first 10):")
        for row in merged.ambiguous_aliases.head(10).itertuples():
            print(f"  {row.title}: {' | '.join(row.could_be)}")


if __name__ == "__main__":
    main()
