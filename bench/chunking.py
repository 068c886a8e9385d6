"""Benchmark: load and chunk the podcast corpus (1,669 transcript files, 4.35 MB) through the real stages.

    .venv/bin/python bench/chunking.py [--zip ../shared/corpora/podcast-transcripts/kevin-scott-podcasts.zip]

Prints the time of loading and of chunking (first run in a fresh process, so it includes building the
token-length table of the encoding) and the counts.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import zipfile
from pathlib import Path

from shared_data import SHARED

from graphrag_lite.config import ChunkingConfig, InputConfig
from graphrag_lite.documents.chunking import chunk_documents
from graphrag_lite.documents.reading import build_documents, list_input_files, read_input_file

DEFAULT_ZIP = SHARED / "corpora/podcast-transcripts/kevin-scott-podcasts.zip"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zip", type=Path, default=DEFAULT_ZIP)
    parser.add_argument("--size", type=int, default=1200)
    parser.add_argument("--overlap", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        zipfile.ZipFile(args.zip).extractall(folder)
        cfg = InputConfig(base_dir=Path(folder))
        started = time.perf_counter()
        files, _ = list_input_files(cfg)
        raw = []
        for path in files:
            raw += read_input_file(path, cfg)[0]
        documents, problems = build_documents(raw)
        loaded = time.perf_counter()
        units = chunk_documents(documents, ChunkingConfig(size=args.size, overlap=args.overlap))
        chunked = time.perf_counter()
    megabytes = documents["text"].str.len().sum() / 1e6
    print(f"corpus: {len(files)} files, {len(documents)} documents, {megabytes:.2f} M characters, "
          f"{len(problems)} skipped")
    print(f"load:   {loaded - started:.2f} s")
    print(f"chunk:  {chunked - loaded:.2f} s -> {len(units)} text units, {units['n_tokens'].sum():,} tokens "
          f"(size {args.size}, overlap {args.overlap}, o200k_base)")


if __name__ == "__main__":
    main()
