"""Input guards: per-file limits (size, JSON nesting, line length), a large document chunked in pieces, a rule-
based extraction linear in its input, and the input folder's links and special files (issue 36, item 4)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pandas as pd
import pytest

from graphrag_lite.config import ChunkingConfig, ExtractGraphNlpConfig, InputConfig
from graphrag_lite.documents import chunking, formats, token_stream
from graphrag_lite.documents.reading import read_documents
from graphrag_lite.nlp import cooccurrence
from graphrag_lite.tokens import get_encoding
from tests.conftest import REPO

PEPYS = (REPO / "input" / "pepys-diary-1661.txt").read_text(encoding="utf-8")
OFFLINE_ENCODINGS = ("o200k_base", "cl100k_base", "p50k_base")  # the ones in the package's tokenizer cache


def stats(project: Path) -> dict:
    return json.loads((project / "output" / "stats.json").read_text(encoding="utf-8"))["stages"]["load_documents"]


def indexed_titles(project: Path) -> list[str]:
    return sorted(pd.read_parquet(project / "output" / "input_documents.parquet")["title"])


# F1: one deeply nested JSON file stopped the whole run (RecursionError, the file not named)

def test_deeply_nested_json_and_jsonl_are_skipped_and_named_and_the_rest_is_indexed(project, cli):
    (project / "input" / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (project / "input" / "deep.jsonl").write_text('{"text": "fine"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    result = cli("index", "--root", project)
    assert result.exit_code == 0, result.output
    assert indexed_titles(project) == ["a.txt", "b.md"]
    load = stats(project)
    problems = [p for p in load["problems"] if p.startswith("deep.")]
    assert len(problems) == 2 and all("input.max_nesting_depth" in p and "100000 levels" in p for p in problems)
    assert load["details"]["files_over_limits"] == 2
    assert "deep.json" in result.output and "deep.jsonl" in result.output  # named in the run's summary


def test_brackets_inside_json_strings_are_not_nesting(tmp_path):
    (tmp_path / "rows.json").write_text(json.dumps([{"text": "[" * 500 + " brackets in a string", "n": [[1]]}]))
    (tmp_path / "rows.jsonl").write_text(json.dumps({"text": "{" * 500 + ' and a quote \\" too'}) + "\n")
    loaded = read_documents(InputConfig(base_dir=tmp_path), iter)
    assert len(loaded.table) == 2 and loaded.problems == []


# F2: no size guard (a 200 MB file: 5.1 GB in chunk_text); a large document is tokenized whole

def test_a_file_over_the_default_size_limit_is_skipped_unread_with_the_setting_that_raises_it(project, cli):
    with open(project / "input" / "huge.txt", "wb") as sparse:  # 200 MB that take no disk space
        sparse.truncate(200 * 2**20)
    result = cli("index", "--root", project)
    assert result.exit_code == 0, result.output
    assert indexed_titles(project) == ["a.txt", "b.md"]
    [problem] = [p for p in stats(project)["problems"] if p.startswith("huge.txt")]
    assert "200.0 MB" in problem and "input.max_file_mb" in problem and "100" in problem
    assert stats(project)["details"]["files_over_limits"] == 1 and "huge.txt" in result.output


def test_the_size_and_line_limits_are_settings(project, cli):
    (project / "input" / "long-line.txt").write_text("word " * 400)  # 2,000 characters on one line
    result = cli("index", "--root", project, "--set", "input.max_line_length=1000")
    assert result.exit_code == 0, result.output
    [problem] = [p for p in stats(project)["problems"] if p.startswith("long-line.txt")]
    assert "line 1" in problem and "input.max_line_length" in problem
    (project / "input" / "small.txt").write_text("A short note.")
    result = cli("index", "--root", project, "--set", "input.max_file_mb=0.0005")  # 524 bytes
    assert result.exit_code == 0, result.output
    assert {p.split(":")[0] for p in stats(project)["problems"]} == {"a.txt", "b.md", "long-line.txt"}
    assert indexed_titles(project) == ["small.txt"]


class RecordingEncoding:
    """The chunker's tokenizer, remembering the longest text it was given at once."""

    def __init__(self, name: str):
        self.encoding = get_encoding(name)
        self.longest = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.longest = max(self.longest, len(text))
        return self.encoding.encode_ordinary(text)

    def encode_ordinary_batch(self, texts: list[str]) -> list[list[int]]:
        self.longest = max([self.longest, *map(len, texts)])
        return self.encoding.encode_ordinary_batch(texts)


def whole_document_windows(text: str, name: str, size: int, overlap: int, min_tail: int) -> list[tuple[str, int]]:
    """The text units of one document tokenized whole: the reference the pieces must give again."""
    tokens = get_encoding(name).encode_ordinary(text)
    data, offsets = text.encode(), [0]
    for token in tokens:
        offsets.append(offsets[-1] + len(get_encoding(name).decode_single_token_bytes(token)))
    windows = []
    for start in range(0, len(tokens), size - overlap):
        end = min(start + size, len(tokens))
        end = len(tokens) if len(tokens) - end < min_tail else end
        begin, stop = offsets[start], offsets[end]
        while 0 < begin < len(data) and data[begin] & 0xC0 == 0x80:
            begin -= 1
        while 0 < stop < len(data) and data[stop] & 0xC0 == 0x80:
            stop += 1
        windows.append((data[begin:stop].decode(), end - start))
        if end == len(tokens):
            break
    return windows


def hostile_text(seed: int, length: int = 3000) -> str:
    """Words, numbers, runs of spaces and line breaks, contractions, slashes, accents, CJK, emoji: every place
    where a tokenizer's pre-split could join or cut characters differently."""
    parts = [" ", "  ", "   ", "\n", "\n\n", "\r\n", " \n", "\t", "\u00a0", "\u3000", "word", "Word", "WORD", "'s",
             "'ll", "123", "12345", ".", "...", "/", "//", "é", "naïve", "日本語の文", "😀", "👍🏽", "-", "(", ")",
             "\"", "x/y", "\n/", ".\n", "\nA", "\n1", " A", "Ünïcödé"]
    rng = random.Random(seed)
    text = ""
    while len(text) < length:
        text += rng.choice(parts)
    return text


@pytest.mark.parametrize("name", OFFLINE_ENCODINGS)
def test_a_document_is_tokenized_in_pieces_into_the_same_text_units(monkeypatch, name):
    texts = [PEPYS[:20_000], *(hostile_text(seed) for seed in range(6)), "x", "  \n "]
    recording = RecordingEncoding(name)
    monkeypatch.setattr(chunking, "get_encoding", lambda _: recording)
    monkeypatch.setattr(token_stream, "PIECE_BYTES", 400)
    for size, overlap, tail in ((60, 10, 0), (25, 0, 7), (300, 30, 0)):
        cfg = ChunkingConfig(size=size, overlap=overlap, min_tail_tokens=tail, encoding_model=name)
        docs = pd.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "title": "t", "text": texts,
                             "metadata": None})
        units = chunking.chunk_documents(docs, cfg)
        for doc_id, text in zip(docs["id"], texts, strict=True):
            mine = units[units["document_id"] == doc_id]
            assert list(zip(mine["text"], mine["n_tokens"], strict=True)) == whole_document_windows(
                text, name, size, overlap, tail), (name, doc_id, size)
    assert recording.longest <= 2 * 400  # a piece ends at the first safe place in its second half


def test_a_stretch_with_nowhere_safe_to_cut_is_cut_anyway_and_loses_nothing(monkeypatch):
    monkeypatch.setattr(token_stream, "PIECE_BYTES", 100)
    text = "ab1é" * 1000 + " tail"  # 5,000 bytes with no space before a word: no safe place to cut
    pieces = list(token_stream.text_pieces(text.encode()))
    assert "".join(pieces) == text and max(len(piece.encode()) for piece in pieces) <= 200
    units = chunking.chunk_documents(pd.DataFrame({"id": ["d"], "title": "t", "text": [text], "metadata": None}),
                                     ChunkingConfig(size=50, overlap=0))
    assert "".join(units["text"]) == text


# F3: extract_graph_nlp was quadratic in the mentions of a name (the type vote recounted for every row)

def test_the_type_vote_reads_each_mention_once(monkeypatch):
    votes_read, mentions_found = [0], [0]
    vote, find = cooccurrence.majority_type, cooccurrence.extract_mentions

    def counted_vote(kinds):
        votes_read[0] += len(list(kinds))  # the types it goes through: one a mention, or one a type once counted
        return vote(kinds)

    def counted_mentions(*args):
        found = find(*args)
        mentions_found[0] += len(found)
        return found

    monkeypatch.setattr(cooccurrence, "majority_type", counted_vote)
    monkeypatch.setattr(cooccurrence, "extract_mentions", counted_mentions)
    texts = [f"Alice Smith met Bob Jones in Paris on day {i}. Then Alice Smith went home." for i in range(400)]
    graph = cooccurrence.extract_nlp_graph(pd.DataFrame({"id": [f"u{i}" for i in range(400)], "text": texts}),
                                           ExtractGraphNlpConfig())
    assert len(graph.entities) == 3 * 400  # every (text unit, name) row is still there
    assert votes_read[0] <= mentions_found[0]  # linear: before, 400 rows x 800 mentions of ALICE SMITH were read


# P7: symlink loops, self-links and FIFOs were ignored uncounted; a link to a file outside was indexed silently

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs symbolic links and FIFOs (POSIX)")
def test_links_and_special_files_are_named_and_counted_and_outside_links_refused(project, cli):
    inputs, outside = project / "input", project.parent / "elsewhere"
    (outside / "folder").mkdir(parents=True)
    (outside / "secret.txt").write_text("Private notes about Mallory.")
    (outside / "folder" / "more.txt").write_text("Notes in a folder outside.")
    (inputs / "sub").mkdir()
    (inputs / "sub" / "up").symlink_to(inputs)  # a loop through a folder
    (inputs / "loop1.txt").symlink_to(inputs / "loop2.txt")
    (inputs / "loop2.txt").symlink_to(inputs / "loop1.txt")
    (inputs / "self.txt").symlink_to(inputs / "self.txt")
    (inputs / "gone.txt").symlink_to(inputs / "missing.txt")
    os.mkfifo(inputs / "pipe.txt")
    (inputs / "secret.txt").symlink_to(outside / "secret.txt")
    (inputs / "linked-folder").symlink_to(outside / "folder")
    (inputs / "alias.txt").symlink_to(inputs / "a.txt")  # inside: followed (a duplicate of a.txt)
    result = cli("index", "--root", project)
    assert result.exit_code == 0, result.output
    assert indexed_titles(project) == ["a.txt", "b.md"]
    load = stats(project)
    reasons = dict(p.split(": ", 1) for p in load["problems"])
    assert "loop" in reasons["loop1.txt"] and "loop" in reasons["loop2.txt"] and "loop" in reasons["self.txt"]
    assert "broken" in reasons["gone.txt"] and "FIFO" in reasons["pipe.txt"]
    assert "inside the input folder" in reasons["sub/up"]
    assert all("outside the input folder" in reasons[name] and "input.follow_outside_links" in reasons[name]
               for name in ("secret.txt", "linked-folder"))
    assert reasons["alias.txt"].startswith("duplicate of a.txt")
    assert load["details"]["entries_not_read"] == 8 and "secret.txt" in result.output

    result = cli("index", "--root", project, "--set", "input.follow_outside_links=true")
    assert result.exit_code == 0, result.output
    assert indexed_titles(project) == ["a.txt", "b.md", "linked-folder/more.txt", "secret.txt"]
    assert stats(project)["details"]["entries_not_read"] == 6


# HTML: reading a page moved a line break in before and after each block element, and bs4 finds an element among
# its siblings one by one: 20,000 paragraphs took 220 s, 100,000 nested divs over 10 minutes

def html_text_by_inserting_breaks(html: str) -> str:
    """How html_text read a page before: the reference its one walk must give again."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for hidden in soup(["script", "style", "noscript", "template"]):
        hidden.decompose()
    for block in soup(sorted(formats.HTML_BLOCKS)):
        block.insert_before("\n")
        block.insert_after("\n")
    lines = (" ".join(line.split()) for line in soup.get_text().splitlines())
    return "\n".join(line for line in lines if line)


PAGE = ("<!DOCTYPE html><html><head><title>News &amp; views</title><style>p {color: red}</style></head><body>"
        "<h1>Head<b>line</b></h1><div>Dana <a href='#'>runs</a> Acme<br>now.<div><p>nested <i>in</i></p>tail</div>"
        "</div><script>var x = '<p>';</script><!-- a comment --><ul><li>one</li><li>two<template>t</template></li>"
        "</ul><table><tr><td>a</td><td>b</td></tr></table><noscript>enable scripts</noscript><![CDATA[raw]]>"
        "<pre>  keep\n  lines  </pre>after <span>inline</span> text</body></html>")


def test_html_is_read_in_one_walk_with_the_same_text_and_no_sibling_scans(monkeypatch):
    from bs4.element import Tag

    assert formats.html_text(PAGE) == html_text_by_inserting_breaks(PAGE)
    many = "<div>" * 300 + "".join(f"<p>paragraph {i}</p>" for i in range(300)) + "</div>" * 300
    assert formats.html_text(many) == html_text_by_inserting_breaks(many)
    scanned, index = [0], Tag.index
    monkeypatch.setattr(Tag, "index", lambda tag, element: scanned.__setitem__(0, scanned[0] + len(tag.contents))
                        or index(tag, element))
    formats.html_text(many)
    assert scanned[0] == 0  # before: 300 paragraphs, each found among its siblings twice
    deep = "<div>" * 100_000 + "deep text" + "</div>" * 100_000
    assert formats.html_text(deep) == "deep text"
