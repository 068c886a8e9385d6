import json

import pandas as pd
import pytest

from graphrag_lite.config import InputConfig
from graphrag_lite.documents.reading import build_documents, list_input_files, read_input_file
from graphrag_lite.errors import InputError


def load(folder, **settings):
    """Read a folder the way the stage does: (documents table, problems as strings)."""
    return load_with(InputConfig(base_dir=folder, **settings))


def load_with(cfg):
    """The same, for input settings already made."""
    files, _ = list_input_files(cfg)
    raw, problems = [], []
    for path in files:
        docs, file_problems = read_input_file(path, cfg)
        raw += docs
        problems += file_problems
    table, duplicates = build_documents(raw)
    return table, [str(p) for p in problems + duplicates]


def test_text_and_markdown_are_one_document_each_titled_by_path(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("Alpha text.", encoding="utf-8")
    (tmp_path / "sub" / "b.md").write_text("# Beta\n\nBody.", encoding="utf-8")
    table, problems = load(tmp_path)
    assert problems == []
    assert table["title"].tolist() == ["a.txt", "sub/b.md"]
    assert table["text"].tolist() == ["Alpha text.", "# Beta\n\nBody."]
    assert table["human_readable_id"].tolist() == [0, 1]


def test_utf8_bom_is_removed(tmp_path):
    (tmp_path / "bom.txt").write_bytes("\ufeffCafé".encode())
    table, _ = load(tmp_path)
    assert table["text"].tolist() == ["Café"]


def test_other_encoding_when_configured(tmp_path):
    (tmp_path / "latin.txt").write_bytes("Café crème".encode("latin-1"))
    table, problems = load(tmp_path, encoding="latin-1")
    assert table["text"].tolist() == ["Café crème"] and problems == []


def test_csv_rows_with_title_id_and_metadata(tmp_path):
    pd.DataFrame({"id": ["d1", "d2"], "headline": ["First", "Second"], "body": ["One text.", "Two text."],
                  "author": ["Ann", "Ben"]}).to_csv(tmp_path / "news.csv", index=False)
    table, problems = load(tmp_path, text_column="body", title_column="headline", id_column="id")
    assert problems == []
    assert table["id"].tolist() == ["d1", "d2"]
    assert table["title"].tolist() == ["First", "Second"]
    assert json.loads(table["metadata"][0]) == {"id": "d1", "headline": "First", "author": "Ann"}
    assert json.loads(table["raw_data"][1])["body"] == "Two text."


def test_metadata_columns_can_be_chosen(tmp_path):
    pd.DataFrame({"text": ["x"], "a": ["1"], "b": ["2"]}).to_csv(tmp_path / "t.csv", index=False)
    table, _ = load(tmp_path, metadata=["b"])
    assert json.loads(table["metadata"][0]) == {"b": "2"}


def test_json_list_single_object_and_jsonl(tmp_path):
    (tmp_path / "list.json").write_text(json.dumps([{"text": "L1"}, {"text": "L2"}, "not an object"]))
    (tmp_path / "one.json").write_text(json.dumps({"text": "Single"}))
    (tmp_path / "rows.jsonl").write_text('{"text": "J1"}\n\n{broken\n{"text": "J2"}\n')
    table, problems = load(tmp_path)
    assert sorted(table["text"]) == ["J1", "J2", "L1", "L2", "Single"]
    assert "list.json item 2: not a JSON object" in problems
    assert any(p.startswith("rows.jsonl line 3: not valid JSON") for p in problems)


def test_parquet_rows(tmp_path):
    pd.DataFrame({"text": ["P1", None, "P3"], "n": [1, 2, 3]}).to_parquet(tmp_path / "t.parquet")
    table, problems = load(tmp_path)
    assert table["text"].tolist() == ["P1", "P3"]
    assert problems == ["t.parquet row 2: no text in column 'text'"]


def test_bad_inputs_are_reported_and_skipped(tmp_path):
    (tmp_path / "good.txt").write_text("Readable text.", encoding="utf-8")
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9 au lait")
    (tmp_path / "empty.md").write_text("  \n")
    pd.DataFrame({"body": ["x"]}).to_csv(tmp_path / "wrong.csv", index=False)
    table, problems = load(tmp_path)
    assert table["title"].tolist() == ["good.txt"]
    assert "image.txt: binary file (contains NUL bytes), not a text document" in problems
    assert any(p.startswith("bad.txt: not valid utf-8 (byte 3") and "input.encoding" in p for p in problems)
    assert "empty.md: empty file" in problems
    assert any(p.startswith("wrong.csv: no column 'text' (columns: body)") and "input.text_column" in p
               for p in problems)
    assert len(problems) == 4


def test_missing_column_suggests_closest(tmp_path):
    pd.DataFrame({"texts": ["x"]}).to_csv(tmp_path / "t.csv", index=False)
    _, problems = load(tmp_path)
    assert "did you mean 'texts'?" in problems[0]


def test_unreadable_file_is_reported(tmp_path):
    (tmp_path / "ok.txt").write_text("fine")
    (tmp_path / "link.txt").symlink_to(tmp_path / "missing-target.txt")
    cfg = InputConfig(base_dir=tmp_path)
    docs, problems = read_input_file(tmp_path / "link.txt", cfg)
    assert docs == [] and "cannot be read" in str(problems[0])


def test_duplicate_text_is_reported_once(tmp_path):
    (tmp_path / "a.txt").write_text("Same words.")
    (tmp_path / "b.txt").write_text("Same words.")
    table, problems = load(tmp_path)
    assert table["title"].tolist() == ["a.txt"]
    assert problems == ["b.txt: duplicate of a.txt (same text); skipped"]


def test_ids_are_content_hashes_and_stable(tmp_path):
    (tmp_path / "a.txt").write_text("Stable text.")
    first, _ = load(tmp_path)
    (tmp_path / "a.txt").touch()
    second, _ = load(tmp_path)
    assert first["id"].tolist() == second["id"].tolist()
    (tmp_path / "a.txt").write_text("Changed text.")
    third, _ = load(tmp_path)
    assert third["id"][0] != first["id"][0]


def test_file_pattern_and_hidden_files(tmp_path):
    (tmp_path / "a.txt").write_text("A")
    (tmp_path / "b.log").write_text("B")
    (tmp_path / ".hidden.txt").write_text("H")
    files, unmatched = list_input_files(InputConfig(base_dir=tmp_path))
    assert [f.name for f in files] == ["a.txt"] and unmatched == 1


def test_missing_input_folder_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        list_input_files(InputConfig(base_dir=tmp_path / "nope"))


def test_zero_usable_documents_fails_the_run(project, cli):
    for path in (project / "input").iterdir():
        path.write_bytes(b"\x00\x01binary")
    result = cli("index", "--root", project)
    assert result.exit_code == 2  # an input error, as docs/indexing.md says (exit codes)
    assert "no usable documents" in result.output and "binary file" in result.output
