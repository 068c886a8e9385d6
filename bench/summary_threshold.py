"""Benchmark (issue 16, point 1): when does a model summary of an entity's descriptions pay for its call?

    .venv/bin/python bench/summary_threshold.py --output OUTPUT_DIR [--model openai/qwen
        --api-base http://127.0.0.1:8090/v1 --api-key sk-local] [--per-bin 3] [--fewest-descriptions 2]

OUTPUT_DIR is a standard index (it needs merged_entities, merged_relationships and communities). A summary
costs one call: the prompt (template and descriptions) and the summary it writes. It saves, in every later
prompt that carries the description, the difference between the joined descriptions and the summary. The
script measures both sides:
- how many report prompts carry each description: an entity is in one community per level, a relationship
  in every community that holds both of its ends (local search adds its own uses, not counted here);
- how much the model shortens descriptions: it samples lists from the index by number of descriptions and
  joined length, has the model summarize them with the packaged prompt, and prints summary / joined tokens.
From them it prints, per bin, the tokens a summary saves over the report prompts minus what its call costs;
a summary pays where that is positive. The defaults of `summarize_descriptions.join_max_tokens` and
`join_max_descriptions` are chosen from these figures (docs/cost.md and docs/benchmarks.md, "When a summary pays").
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
from pathlib import Path

import pandas as pd

from graphrag_lite.config import CacheConfig, GraphRagConfig, ModelConfig, SummarizeDescriptionsConfig
from graphrag_lite.graph.summaries import summarize
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.prompts import fill, load_prompt
from graphrag_lite.tokens import count_tokens

BINS = [(2, 2, 0, 100), (2, 2, 100, 400), (3, 4, 0, 200), (3, 4, 200, 600), (5, 8, 0, 400), (5, 8, 400, 1500),
        (9, 10_000, 0, 400), (9, 10_000, 400, 100_000)]  # (fewest descriptions, most, fewest joined tokens, most)


def carried(output: Path) -> tuple[float, float]:
    """How many report prompts carry an entity's and a relationship's description, on average."""
    communities = pd.read_parquet(output / "communities.parquet")
    entities = pd.read_parquet(output / "merged_entities.parquet")
    relationships = pd.read_parquet(output / "merged_relationships.parquet")
    entity_uses = sum(len(ids) for ids in communities["entity_ids"]) / max(1, len(entities))
    relationship_uses = sum(len(ids) for ids in communities["relationship_ids"]) / max(1, len(relationships))
    return entity_uses, relationship_uses


def samples(output: Path, per_bin: int, fewest_descriptions: int = 2
            ) -> list[tuple[tuple[int, int, int, int], str, list[str]]]:
    rows = []
    for table, subject in (("merged_entities", lambda r: r["title"]),
                           ("merged_relationships", lambda r: f"{r['source']}, {r['target']}")):
        for _, row in pd.read_parquet(output / f"{table}.parquet").iterrows():
            rows.append((subject(row), list(row["descriptions"])))
    random.Random(0).shuffle(rows)
    chosen = []
    for low, high, fewest, most in (b for b in BINS if b[0] >= fewest_descriptions):
        inside = [(s, d) for s, d in rows if low <= len(d) <= high
                  and fewest <= count_tokens(" ".join(d)) < most]
        chosen += [((low, high, fewest, most), s, d) for s, d in inside[:per_bin]]
    return chosen


async def measure(args: argparse.Namespace, chosen: list) -> list[tuple[tuple, int, int, int]]:
    """(bin, joined tokens, summary tokens, prompt tokens) per sample."""
    cfg = SummarizeDescriptionsConfig()
    template = load_prompt(None, "summarize_descriptions.txt")
    with tempfile.TemporaryDirectory() as cache:
        model = ModelConfig(model=args.model, api_base=args.api_base, api_key=args.api_key, timeout=900,
                            concurrency=1)
        gateway = Gateway(GraphRagConfig(models={"default_chat_model": model}, cache=CacheConfig(base_dir=Path(cache))))
        results = []
        for number, (bin_, subject, descriptions) in enumerate(chosen, 1):
            joined = " ".join(descriptions)
            summary = await summarize(gateway, cfg, template, subject, descriptions)
            prompt = fill(template, entity_name=subject, description_list="\n".join(sorted(descriptions)),
                          max_length=cfg.max_length)
            results.append((bin_, count_tokens(joined), count_tokens(summary),
                            count_tokens(prompt)))
            print(f"  {number}/{len(chosen)} {subject[:40]!r}: {len(descriptions)} descriptions, "
                  f"{results[-1][1]} -> {results[-1][2]} tokens", flush=True)
    return results


def report(results: list, uses: tuple[float, float]) -> None:
    use = statistics.mean(uses)
    print(f"report prompts carrying a description: {uses[0]:.2f} per entity, {uses[1]:.2f} per relationship "
          f"(used below: {use:.2f})")
    print(f"{'descriptions':>13}{'joined tok':>12}{'samples':>8}{'summary/joined':>16}{'call tok':>10}"
          f"{'saved later':>12}{'net':>8}")
    for low, high, fewest, most in BINS:
        inside = [r for r in results if r[0] == (low, high, fewest, most)]
        if not inside:
            continue
        joined = statistics.mean(r[1] for r in inside)
        summary = statistics.mean(r[2] for r in inside)
        call = statistics.mean(r[3] + r[2] for r in inside)
        saved = (joined - summary) * use
        label = f"{low}-{high}" if high < 10_000 else f"{low}+"
        print(f"{label:>13}{f'{fewest}-{most}':>12}{len(inside):>8}{summary / joined:>16.2f}{call:>10.0f}"
              f"{saved:>12.0f}{saved - call:>8.0f}")
    default = SummarizeDescriptionsConfig()
    print(f"defaults: joined with no call up to {default.join_max_descriptions} descriptions and "
          f"{default.join_max_tokens} tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--model", default="openai/qwen")
    parser.add_argument("--api-base", default="http://127.0.0.1:8090/v1")
    parser.add_argument("--api-key", default="sk-local")
    parser.add_argument("--per-bin", type=int, default=3)
    parser.add_argument("--fewest-descriptions", type=int, default=2, help="only the bins of lists this long or longer")
    args = parser.parse_args()
    uses = carried(args.output)
    results = asyncio.run(measure(args, samples(args.output, args.per_bin, args.fewest_descriptions)))
    report(results, uses)


if __name__ == "__main__":
    main()
