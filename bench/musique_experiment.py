"""Benchmark: bench/musique_retrieval.py --method fast, as an experiment (bench/musique.yaml).

    .venv/bin/python bench/musique_experiment.py [--project bench/.musique-project] [--experiment bench/musique.yaml]

Prepares the project folder (created if missing; rewritten only where its files differ): input/paragraphs.jsonl
and settings.yaml exactly as musique_retrieval.build_fast_index writes them, and questions.jsonl from
MuSiQue's questions.json (group "N hops", gold evidence_documents "paragraph-N" as gold_paragraphs computes
them). Then runs the experiment and prints its results and all-gold by hop count. The recall figures should
equal musique_retrieval.py's: local = "local (ppr)", basic_packed = "basic packed to 12,000 tokens",
basic = "basic k=10 (the default)".
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
from musique_retrieval import CORPUS, QUESTIONS, fast_project_files, gold_paragraphs

HERE = Path(__file__).resolve().parent


def _write(path: Path, text: str) -> None:
    """Idempotent: the file is left alone (mtime and all) when it already holds `text`."""
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def prepare_project(folder: Path) -> None:
    """musique_retrieval's fast project, and its questions with their gold paragraphs as evidence."""
    corpus = json.loads(CORPUS.read_text())
    by_text = {(c["title"], c["text"].strip()): i for i, c in enumerate(corpus)}
    _write(folder / ".gitignore", "*\n")  # nothing of this folder belongs in git
    for name, text in fast_project_files().items():
        _write(folder / name, text)
    _write(folder / "questions.jsonl", "".join(json.dumps({
        "id": q["id"], "question": q["question"], "answer": q["answer"], "answer_aliases": q.get("answer_aliases", []),
        "group": f"{q['id'][0]} hops", "evidence_documents": sorted(gold_paragraphs(q, by_text)),
    }) + "\n" for q in json.loads(QUESTIONS.read_text())))


def per_group(output: Path, variants: set[str]) -> pd.DataFrame:
    from graphrag_lite.evaluation.evaluate import QuestionResult, summary_table

    tables = []
    for evaluation in sorted(output / "variants" / name / "evaluation.json" for name in variants):
        results = [QuestionResult(**r) for r in json.loads(evaluation.read_text())["results"]]
        table = summary_table(results, by=("method", "group"))
        table.insert(0, "variant", evaluation.parent.name)
        tables.append(table)
    frame = pd.concat(tables)
    table = frame.pivot_table(index=["variant", "method"], columns="group", values="all_gold", sort=False)
    return table[sorted(table.columns)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", type=Path, default=HERE / ".musique-project",
                        help="must be the experiment file's `project`")
    parser.add_argument("--experiment", type=Path, default=HERE / "musique.yaml")
    args = parser.parse_args()
    prepare_project(args.project)
    from rich.console import Console

    from graphrag_lite import run_experiment

    table = run_experiment(args.experiment, Console())
    output = Path(table.attrs["report"]).parent if "report" in table.attrs else HERE / ".musique-results"
    _write(output / ".gitignore", "*\n")
    columns = [c for c in ("variant", "method", "questions", "all_gold", "recall", "query_median_s") if c in table]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table[columns].to_string(index=False))
        print("\nall-gold by group:")
        print(per_group(output, set(table["variant"])).round(3).to_string())
    print(f"\nresults: {output / 'results.csv'}")


if __name__ == "__main__":
    main()
