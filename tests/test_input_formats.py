"""Mixed input folders (per-file rules in input.files) and PDF, DOCX and HTML documents."""

import json
import sys

import docx
import pandas as pd
import pytest

from graphrag_lite.config import InputConfig, load_config
from graphrag_lite.errors import ConfigError
from tests.conftest import write_settings
from tests.test_load_documents import load_with as load

EXTRA = "pip install 'graphrag-lite[documents]'"


def pdf_bytes(pages):
    """A minimal PDF with one line of Helvetica text per page (an empty string: a page without text)."""
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    bodies = [b"<< /Type /Catalog /Pages 2 0 R >>",
              f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
              b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode() if text else b""
        bodies.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * i} 0 R "
                      "/Resources << /Font << /F1 3 0 R >> >> >>".encode())
        bodies.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(bodies, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(bodies) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(bodies) + 1, xref)
    return bytes(out)


MIXED_SETTINGS = r"""
input:
  base_dir: docs
  title_column: title
  files:
    - {pattern: '^news/.*\.csv$', text_column: body, title_column: headline}
    - {pattern: '.*\.csv$', text_column: bio, title_column: name, metadata: [born]}
    - {pattern: '.*\.jsonl$', text_column: content}
"""


def test_mixed_folder_takes_the_first_matching_rule(tmp_path):
    docs = tmp_path / "docs"
    (docs / "news").mkdir(parents=True)
    pd.DataFrame({"headline": ["Storm"], "body": ["A storm hit the coast."], "author": ["Ann"]}).to_csv(
        docs / "news" / "today.csv", index=False)
    pd.DataFrame({"name": ["Ada"], "bio": ["Ada wrote programs."], "born": ["1815"], "notes": ["x"]}).to_csv(
        docs / "people.csv", index=False)
    (docs / "rows.jsonl").write_text(json.dumps({"title": "Log", "content": "The log line."}) + "\n")
    (docs / "notes.txt").write_text("Plain notes.")
    write_settings(tmp_path, MIXED_SETTINGS)
    table, problems = load(load_config(tmp_path).input)
    assert problems == []
    by_title = {row.title: row for row in table.itertuples()}
    assert {title: row.text for title, row in by_title.items()} == {
        "Storm": "A storm hit the coast.", "Ada": "Ada wrote programs.", "Log": "The log line.",
        "notes.txt": "Plain notes."}
    assert json.loads(by_title["Storm"].metadata) == {"headline": "Storm", "author": "Ann"}
    assert json.loads(by_title["Ada"].metadata) == {"born": "1815"}  # the rule's metadata columns
    assert json.loads(by_title["Log"].metadata) == {"title": "Log"}  # title_column from the section
    assert pd.isna(by_title["notes.txt"].metadata)


def test_without_rules_every_file_takes_the_section_settings(tmp_path):
    pd.DataFrame({"body": ["One."], "tag": ["t"]}).to_csv(tmp_path / "a.csv", index=False)
    table, problems = load(InputConfig(base_dir=tmp_path, text_column="body"))
    assert problems == [] and table["text"].tolist() == ["One."]
    assert json.loads(table["metadata"][0]) == {"tag": "t"}


def test_a_title_key_is_the_title_without_title_column(tmp_path):
    """A new user's JSONL had `title` keys, which were kept as metadata while the title was "file row 1"."""
    rows = [{"text": "One.", "title": "First"}, {"text": "Two.", "title": "Second"}]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    pd.DataFrame({"text": ["Three."]}).to_csv(tmp_path / "b.csv", index=False)
    table, problems = load(InputConfig(base_dir=tmp_path))
    assert problems == [] and sorted(table["title"]) == ["First", "Second", "b.csv row 1"]


@pytest.mark.parametrize(("rule", "message"), [
    ("{pattern: '(', text_column: body}", "input.files.1.pattern = '(': '(' is not a valid regular expression"),
    ("{text_column: body}", "input.files.1: every rule needs a `pattern`"),
    ("{pattern: x, text_colum: body}", "unknown key 'input.files.1.text_colum'"),
    ("{pattern: x, encoding: klingon}", "input.files.1.encoding = 'klingon': 'klingon' is not a known"),
])
def test_a_bad_rule_is_a_config_error_naming_the_key(tmp_path, rule, message):
    write_settings(tmp_path, f"input:\n  files:\n    - {{pattern: '.*'}}\n    - {rule}\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert message in str(err.value)


def test_every_dropped_file_is_named_before_the_rows(project, cli):
    inputs = project / "input"  # beside a.txt and b.md
    (inputs / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    pd.DataFrame({"body": ["x"]}).to_csv(inputs / "wrong.csv", index=False)
    (inputs / "header-only.csv").write_text("text,author\n")
    (inputs / "bad.jsonl").write_text('{"text": ""}\n[1]\n')
    (inputs / "rows.jsonl").write_text("{broken\n" * 7 + '{"text": "The one good row."}\n')
    result = cli("index", "--root", project)
    assert result.exit_code == 0, result.output
    assert ("7 files -> 3 documents; 4 files dropped: bad.jsonl, header-only.csv, image.txt, wrong.csv (why below "
            "and in stats.json); 9 rows skipped (listed in stats.json)") in result.output
    stats = json.loads((project / "output" / "stats.json").read_text())
    problems = stats["stages"]["load_documents"]["problems"]
    assert problems[:3] == ["bad.jsonl: none of its 2 rows could be used (listed below)",
                            "header-only.csv: no rows in it",
                            "image.txt: binary file (contains NUL bytes), not a text document"]
    assert problems[3].startswith("wrong.csv: no column 'text'") and len(problems) == 13
    for problem in problems[:4]:  # the terminal shows the first five
        assert f"! {problem}" in result.output


def test_pdf_docx_and_html_are_read_with_pages_kept(tmp_path):
    (tmp_path / "report.pdf").write_bytes(pdf_bytes(["Alpha is on page one.", "", "Gamma is on page three."]))
    memo = docx.Document()
    memo.add_heading("Memo", level=1)
    memo.add_paragraph("Bob met Carol in Lisbon.")
    table = memo.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, [("Name", "Role"), ("Bob", "Pilot")], strict=True):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    memo.save(tmp_path / "memo.docx")
    (tmp_path / "page.html").write_text(
        "<html><head><title>News</title><style>p {color: red}</style><script>var secret = 1;</script></head>"
        "<body><h1>Headline</h1><p>Dana runs <b>Acme</b> now.</p><ul><li>one</li><li>two</li></ul>"
        "<noscript>enable scripts</noscript><!-- hidden --></body></html>")
    table, problems = load(InputConfig(base_dir=tmp_path))
    assert problems == []
    by_title = {row.title: row for row in table.itertuples()}
    pdf = by_title["report.pdf"]
    assert pdf.text == "[page 1]\nAlpha is on page one.\n\n[page 3]\nGamma is on page three."
    assert json.loads(pdf.metadata) == {"pages": 3}
    assert by_title["memo.docx"].text == "Memo\nBob met Carol in Lisbon.\nName | Role\nBob | Pilot"
    assert by_title["page.html"].text == "News\nHeadline\nDana runs Acme now.\none\ntwo"


def test_damaged_or_textless_documents_are_reported(tmp_path):
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    (tmp_path / "scan.pdf").write_bytes(pdf_bytes(["", ""]))
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    (tmp_path / "empty.html").write_text("<html><script>only()</script></html>")
    (tmp_path / "ok.txt").write_text("Fine.")
    table, problems = load(InputConfig(base_dir=tmp_path))
    assert table["title"].tolist() == ["ok.txt"]
    assert sorted(p.split(":")[0] for p in problems) == ["broken.docx", "broken.pdf", "empty.html", "scan.pdf"]
    assert any(p.startswith("broken.pdf: not a readable PDF file") for p in problems)
    assert "scan.pdf: no text in its 2 pages (scanned images? run OCR on it first)" in problems
    assert "empty.html: no text in it" in problems


@pytest.mark.parametrize(("module", "file", "library"), [
    ("pypdf", "a.pdf", "pypdf"), ("docx", "a.docx", "python-docx"), ("bs4", "a.html", "beautifulsoup4")])
def test_a_missing_library_names_the_extra(tmp_path, monkeypatch, module, file, library):
    (tmp_path / file).write_bytes(pdf_bytes(["Text."]) if file.endswith(".pdf") else b"<p>Text.</p>")
    (tmp_path / "ok.txt").write_text("Fine.")
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail as if it were not installed
    table, problems = load(InputConfig(base_dir=tmp_path))
    assert table["title"].tolist() == ["ok.txt"]
    assert problems == [f"{file}: reading {file.split('.')[1].upper()} files needs the {library} library, which "
                        f"is not installed: {EXTRA} (or leave such files out with input.file_pattern)"]
