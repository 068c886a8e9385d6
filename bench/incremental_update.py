"""Benchmark (issue 15): what `graphrag-lite update` costs after documents are added or deleted, against a
full index of the same project.

    .venv/bin/python bench/incremental_update.py [--corpus hotpotqa|pepys] [--documents 100] [--added 1 10]

hotpotqa: the first Wikipedia paragraphs of ../shared/corpora/hotpotqa-100/corpus.json, one file each (many
small connected components). pepys: The Diary of Samuel Pepys (../shared/corpora/novels-dev, Novel-4128) cut
into parts of about 700 characters at sentence ends, one file each (one large component: every entry meets
the same people). A standard index of --documents files is built through the fake provider; then, for each
count in --added, that many further files are added to a copy of the finished project (its cache included)
and `update` runs; a last copy has its first document deleted. For each stage, the model calls sent (calls
answered from the cache aside) of the full index and of every update are printed, with the share of the full
index's calls each update sent (issue 15's targets: at most 5% for one document added to 100, and 20% for
10% more documents), the reports kept and written, the communities kept with exactly their members, and
the level-0 modularity of the updated communities against a fresh clustering of the same graph.
"""

from __future__ import annotations

import argparse
import json
import re
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
PART_CHARACTERS = 700


def hotpotqa(count: int) -> list[tuple[str, str]]:
    corpus = json.loads(shared_path("corpora/hotpotqa-100/corpus.json").read_text(encoding="utf-8"))
    return [(title, " ".join(sentences).strip()) for title, sentences in list(corpus.items())[:count]]


def pepys(count: int) -> list[tuple[str, str]]:
    text = shared_path("corpora/novels-dev/books/Novel-4128.txt").read_text(encoding="utf-8")
    parts, current = [], ""
    for sentence in (p.strip() for p in re.split(r"(?<=[.!?])\s+", text) if p.strip()):
        current = f"{current} {sentence}" if current else sentence
        if len(current) >= PART_CHARACTERS:
            parts.append(current)
            current = ""
    if len(parts) < count:
        raise SystemExit(f"the diary gives {len(parts)} parts of {PART_CHARACTERS} characters, fewer than {count}")
    return [(f"Pepys part {n + 1}", part) for n, part in enumerate(parts[:count])]


def write(folder: Path, documents: list[tuple[str, str]]) -> None:
    for number, (title, text) in enumerate(documents):
        name = "".join(c if c.isalnum() else "-" for c in title)[:60]
        (folder / f"{number:04d}-{name}.txt").write_text(f"{title}\n\n{text}\n", encoding="utf-8")


def member_sets(root: Path) -> set[frozenset[str]]:
    """Each community's members, by entity title."""
    import pandas as pd

    entities = pd.read_parquet(root / "output" / "entities.parquet")
    titles = dict(zip(entities["id"], entities["title"], strict=True))
    communities = pd.read_parquet(root / "output" / "communities.parquet")
    return {frozenset(titles[e] for e in ids) for ids in communities["entity_ids"]}


def modularity(root: Path) -> tuple[float, float]:
    """The level-0 modularity of the index's communities, and of a fresh clustering of the same graph (what
    starting from the previous partition costs in quality)."""
    import pandas as pd

    from graphrag_lite.graph.cluster import build_graph, hierarchical_leiden

    entities = pd.read_parquet(root / "output" / "entities.parquet")
    relationships = pd.read_parquet(root / "output" / "relationships.parquet")
    communities = pd.read_parquet(root / "output" / "communities.parquet")
    index = {title: i for i, title in enumerate(sorted(entities["title"]))}
    ids = dict(zip(entities["id"], entities["title"], strict=True))
    graph = build_graph(len(index), [(index[a], index[b]) for a, b in zip(relationships["source"],
                                                                          relationships["target"], strict=True)],
                        relationships["weight"].astype(float).tolist())
    membership = [0] * len(index)
    level0 = communities[communities["level"] == 0]
    for number, members in zip(level0["community"], level0["entity_ids"], strict=True):
        for entity in members:
            membership[index[ids[entity]]] = int(number) + 1
    fresh = [0] * len(index)
    for c in hierarchical_leiden(graph, 10, 0xDEADBEEF):
        if c.level == 0:
            for v in c.members:
                fresh[v] = c.community + 1
    return graph.modularity(membership, weights="weight"), graph.modularity(fresh, weights="weight")


def run(command: str, root: Path) -> dict:
    """Run `index` or `update`; returns stats.json."""
    done = subprocess.run([sys.executable, "-m", "graphrag_lite", command, "--root", str(root), "--quiet"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))


def calls_sent(stats: dict) -> dict[str, int]:
    """Model calls sent per stage by this run (stages it skipped sent none)."""
    return {name: s["llm"]["calls"] - s["llm"]["cache_hits"] for name, s in stats["stages"].items()
            if s.get("llm") and not str(s.get("status", "")).startswith("unchanged")}


def variant(base: Path, scratch: Path, name: str, documents: list[tuple[str, str]], delete: int = 0) -> tuple:
    project = scratch / name
    shutil.copytree(base, project)
    write(project / "input", documents)
    for path in sorted((project / "input").glob("*.txt"))[:delete]:
        path.unlink()
    stats = run("update", project)
    before, after = member_sets(base), member_sets(project)
    return calls_sent(stats), stats.get("update", {}), (len(after & before), len(after)), modularity(project)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=("hotpotqa", "pepys"), default="hotpotqa")
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--added", type=int, nargs="+", default=[1, 10])
    args = parser.parse_args()
    documents = (hotpotqa if args.corpus == "hotpotqa" else pepys)(args.documents + max(args.added))
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        base = scratch / "base"
        (base / "input").mkdir(parents=True)
        (base / "settings.yaml").write_text(SETTINGS, encoding="utf-8")
        write(base / "input", documents[: args.documents])
        full = calls_sent(run("index", base))
        for added in args.added:
            runs[f"+{added} docs"] = variant(base, scratch, f"plus-{added}", documents[: args.documents + added])
        runs["-1 doc"] = variant(base, scratch, "minus-1", documents[: args.documents], delete=1)
    report(args, full, runs)


def report(args: argparse.Namespace, full: dict[str, int], runs: dict[str, tuple]) -> None:
    stages = list(dict.fromkeys([*full, *(s for sent, *_ in runs.values() for s in sent)]))
    print(f"model calls sent, {args.documents} {args.corpus} documents (fake provider, cache kept between runs)")
    print(f"{'stage':24}{'full index':>12}" + "".join(f"{name:>12}" for name in runs))
    for stage in [*stages, "all"]:
        values = [sum(full.values()) if stage == "all" else full.get(stage, 0)]
        values += [sum(sent.values()) if stage == "all" else sent.get(stage, 0) for sent, *_ in runs.values()]
        print(f"{stage:24}" + "".join(f"{v:>12,}" for v in values))
    total = sum(full.values()) or 1
    for name, (sent, record, (same, communities), (kept_q, fresh_q)) in runs.items():
        target = {"+1 docs": " (issue 15's target: at most 5%)", "+10 docs": " (target: at most 20%)"}.get(name, "")
        reports = record.get("reports", {})
        print(f"{name}: {sum(sent.values()) / total:.1%} of a full index's calls{target}; reports kept "
              f"{reports.get('reports_kept', 0)}, written {reports.get('reports_written', 0)}; communities with "
              f"the same members as before: {same} of {communities}; new text units "
              f"{record.get('text_units', {}).get('new_text_units', 0)}; level-0 modularity {kept_q:.3f} (a fresh "
              f"clustering: {fresh_q:.3f})")


if __name__ == "__main__":
    main()
