"""Benchmark (issue 16, point 3): what a gleaning finds with `history` and with `compact` follow-ups, per text
unit length, on a real model.

    .venv/bin/python bench/gleaning_modes.py --model openai/qwen --api-base http://127.0.0.1:8090/v1 \
        --api-key sk-local [--short 5 --long 5] [--format auto|json|tuples] [--keep DIR]

The text units are the openings of the GraphRAG paper's podcast transcripts, one per episode: `--short` of
about 150 tokens (a chunk tail's size) and `--long` of about 600. Each mode indexes them with extract_graph
only (one gleaning) into its own project; the three projects share one answer cache, so every mode gets the
same first answer and differs only in its follow-up. The first answers alone come from a run with
`max_gleanings: 0`. Per mode and length the script prints the entities the first answers named, the ones the
gleaning added (by normalized name, per unit), how many of those occur in their unit's text, and how many both
modes added; then each mode's extraction prompt tokens sent: the first-answer run's are the first answers',
and history and compact, which take those from the cache, send their follow-ups' alone.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pandas as pd
import yaml
from shared_data import shared_path

from graphrag_lite.tokens import count_tokens

PIPELINE = "description: extraction only\nstages: [load_documents, chunk_text, extract_graph]\n"
# in this order: the first-answer run pays for the first answers, which the other two then take from the cache,
# so their figures are their follow-ups' alone and compare with each other
MODES = {"first answer": {"max_gleanings": 0}, "history": {"gleaning": "history"},
         "compact": {"gleaning": "compact"}}


def openings(short: int, long: int) -> list[tuple[str, str]]:
    """(name, text) of `short` + `long` podcast openings, a different episode each, cut at a sentence end."""
    with zipfile.ZipFile(shared_path("corpora/podcast-transcripts/kevin-scott-podcasts.zip")) as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".txt"))
        texts = [archive.read(n).decode("utf-8") for n in names]
    chosen = []
    for number, (size, kind) in enumerate([(150, "short")] * short + [(600, "long")] * long):
        text = texts[(number * 7 + 3) % len(texts)]  # spread over the episodes
        words, cut = text.split(), ""
        for end in range(len(words)):
            cut = " ".join(words[: end + 1])
            if count_tokens(cut) >= size and re.search(r"[.?!]$", cut):
                break
        chosen.append((f"{kind}-{number:02d}", cut))
    return chosen


def index(root: Path, cache: Path, documents: list[tuple[str, str]], args: argparse.Namespace,
          extract: dict) -> pd.DataFrame:
    (root / "input").mkdir(parents=True)
    for name, text in documents:
        (root / "input" / f"{name}.txt").write_text(text, encoding="utf-8")
    (root / "extract.yaml").write_text(PIPELINE, encoding="utf-8")
    settings = {"models": {"default_chat_model": {"model": args.model, "api_base": args.api_base,
                                                  "api_key": args.api_key, "concurrency": 1, "timeout": 900}},
                "chunking": {"size": 1200}, "cache": {"base_dir": str(cache)},
                "extract_graph": {"max_gleanings": 1, "format": args.format, **extract}}
    (root / "settings.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--method",
                           str(root / "extract.yaml"), "--quiet"], capture_output=True, text=True)
    if done.returncode not in (0, 4):
        raise SystemExit(f"index failed ({done.returncode}): {done.stderr[-2000:]}")
    entities = pd.read_parquet(root / "output" / "raw_entities.parquet")
    units = pd.read_parquet(root / "output" / "base_text_units.parquet")
    documents_table = pd.read_parquet(root / "output" / "documents.parquet")
    titles = dict(zip(documents_table["id"], documents_table["title"], strict=True))
    unit_doc = {u: titles[d] for u, d in zip(units["id"], units["document_id"], strict=True)}
    entities["unit"] = entities["text_unit_id"].map(unit_doc)
    entities["key"] = entities["name"].str.upper().str.strip()
    return entities


def names_by_unit(entities: pd.DataFrame) -> dict[str, set[str]]:
    return {unit: set(group["key"]) for unit, group in entities.groupby("unit")}


def report(found: dict[str, pd.DataFrame], documents: list[tuple[str, str]]) -> None:
    text_of = {f"{name}.txt": text.upper() for name, text in documents}
    first = names_by_unit(found["first answer"])
    added = {mode: {u: names - first.get(u, set()) for u, names in names_by_unit(found[mode]).items()}
             for mode in ("history", "compact")}
    print("| units | first answers | mode | added by the gleaning | of them in the unit's text | added by both |")
    print("|---|---|---|---|---|---|")
    for kind in ("short", "long"):
        units = [f"{name}.txt" for name, _ in documents if name.startswith(kind)]
        named = sum(len(first.get(u, set())) for u in units)
        for mode in ("history", "compact"):
            other = "compact" if mode == "history" else "history"
            mine = {(u, n) for u in units for n in added[mode].get(u, set())}
            theirs = {(u, n) for u in units for n in added[other].get(u, set())}
            grounded = sum(1 for u, n in mine if n in text_of[u])
            print(f"| {len(units)} {kind} | {named} | {mode} | {len(mine)} | {grounded} | {len(mine & theirs)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-base")
    parser.add_argument("--api-key", default="sk-local")
    parser.add_argument("--short", type=int, default=5)
    parser.add_argument("--long", type=int, default=5)
    parser.add_argument("--format", choices=("auto", "json", "tuples"), default="auto",
                        help="extract_graph.format (tuples: Microsoft GraphRAG's prompt)")
    parser.add_argument("--keep", type=Path, help="keep the projects and their cache in this folder")
    args = parser.parse_args()
    documents = openings(args.short, args.long)
    with tempfile.TemporaryDirectory() as scratch:
        base = args.keep or Path(scratch)
        found = {mode: index(base / mode.replace(" ", "-"), base / "cache", documents, args, extract)
                 for mode, extract in MODES.items()}
        report(found, documents)
        for mode in MODES:
            llm = json.loads((base / mode.replace(" ", "-") / "output" / "stats.json").read_text(encoding="utf-8")
                             )["stages"]["extract_graph"].get("llm") or {}
            print(f"{mode}: {llm.get('calls', 0) - llm.get('cache_hits', 0)} calls sent, "
                  f"{llm.get('prompt_tokens', 0):,} prompt tokens")


if __name__ == "__main__":
    main()
