"""Benchmark (issue 15): what re-indexing costs after documents are added, against a full index.

    .venv/bin/python bench/incremental_update.py [--documents 100] [--added 1 10]

The documents are the first Wikipedia paragraphs of ../shared/corpora/hotpotqa-100/corpus.json, one file each.
A standard index is built through the fake provider; then, for each count in --added, that many further
paragraphs are added to a copy of the finished project (its cache included) and the index is run again. For
each stage, the model calls sent (calls answered from the cache aside) of the full index and of every update
are printed, with the share of the full index's calls each update sent (issue 15's targets are at most 5%
for one document added to 100, and 20% for 10% more documents), and how many communities keep exactly their
members (by entity title): the reports an update could keep. The baseline is what `graphrag-lite index`
does today: the cache spares the unchanged extractions, while everything after extraction runs again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shared_data import shared_path

SETTINGS = """models:
  default_chat_model:
    model: fake/default
    concurrency: 50
  default_embedding_model:
    model: fake/embedding
"""


def paragraphs(count: int) -> list[tuple[str, str]]:
    corpus = json.loads(shared_path("corpora/hotpotqa-100/corpus.json").read_text(encoding="utf-8"))
    return [(title, " ".join(sentences).strip()) for title, sentences in list(corpus.items())[:count]]


def write(folder: Path, documents: list[tuple[str, str]]) -> None:
    for number, (title, text) in enumerate(documents):
        name = "".join(c if c.isalnum() else "-" for c in title)[:60]
        (folder / f"{number:04d}-{name}.txt").write_text(f"{title}\n\n{text}\n", encoding="utf-8")


def member_sets(root: Path) -> set[frozenset[str]]:
    """Each community's members, by entity title: the communities an update could keep with their reports."""
    import pandas as pd

    entities = pd.read_parquet(root / "output" / "entities.parquet")
    titles = dict(zip(entities["id"], entities["title"], strict=True))
    communities = pd.read_parquet(root / "output" / "communities.parquet")
    return {frozenset(titles[e] for e in ids) for ids in communities["entity_ids"]}


def index(root: Path) -> dict[str, int]:
    """Model calls sent per stage (not those answered from the cache)."""
    done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--quiet"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"index failed ({done.returncode}): {done.stderr[-2000:]}")
    stages = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))["stages"]
    return {name: s["llm"]["calls"] - s["llm"]["cache_hits"] for name, s in stages.items() if s.get("llm")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--added", type=int, nargs="+", default=[1, 10])
    args = parser.parse_args()
    documents = paragraphs(args.documents + max(args.added))
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch) / "base"
        (base / "input").mkdir(parents=True)
        (base / "settings.yaml").write_text(SETTINGS, encoding="utf-8")
        write(base / "input", documents[: args.documents])
        full = index(base)
        before = member_sets(base)
        runs, same = {}, {}
        for added in args.added:
            project = Path(scratch) / f"plus-{added}"
            shutil.copytree(base, project)
            write(project / "input", documents[: args.documents + added])
            runs[added] = index(project)
            after = member_sets(project)
            same[added] = (len(after & before), len(after))
    stages = list(dict.fromkeys([*full, *(s for run in runs.values() for s in run)]))
    header = f"{'stage':24}{'full index':>12}" + "".join(f"{f'+{a} docs':>12}" for a in args.added)
    print(f"model calls sent, {args.documents} documents (fake provider, cache kept between runs)\n{header}")
    for stage in [*stages, "all"]:
        values = [sum(full.values())] if stage == "all" else [full.get(stage, 0)]
        values += [sum(run.values()) if stage == "all" else run.get(stage, 0) for run in runs.values()]
        print(f"{stage:24}" + "".join(f"{v:>12,}" for v in values))
    total = sum(full.values()) or 1
    for added, run in runs.items():
        target = 5 if added == 1 else 20
        print(f"+{added} documents: {sum(run.values()) / total:.0%} of a full index's calls (issue 15's target: "
              f"at most {target}%); communities with the same members as before: {same[added][0]} of "
              f"{same[added][1]} (their reports could be kept)")


if __name__ == "__main__":
    main()
