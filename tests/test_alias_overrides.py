"""A user's corrections to entity resolution (entity_resolution.overrides) and `graphrag-lite aliases`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from graphrag_lite.alias_overrides import read_alias_overrides
from graphrag_lite.errors import ConfigError
from graphrag_lite.graph.merge import merge_graph
from tests.conftest import check_index, write_settings
from tests.test_resolution import entities, relationships

STORY = ("Sherlock Holmes lived in London with John Watson. Dr. Watson wrote while Holmes played. "
         "Holmes told Watson about Irene Adler. Miss Adler wrote to Holmes from London. "
         "Mrs. Hudson brought tea to Sherlock Holmes. Mr. Hudson was never seen. Watson thanked Mrs. Hudson.\n")


def overrides_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "aliases.csv"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "expected"), [
    ("alias,titel,action\nHolmes,Sherlock Holmes,merge\n", "no title column (found 'alias', 'titel', 'action')"),
    ("alias;title;action\nHolmes;Sherlock Holmes;merge\n", "columns are separated by commas"),
    ("", "(the file is empty)"),
    ("alias,title,action\n\n,,\nHolmes,Sherlock Holmes,join\n", "line 4: action 'join' is not one of merge, never"),
    ("alias,title,action\nA,B,merge\nB,C,merge\nC,A,merge\n", "the merges go round in a loop (A -> B -> C -> A)"),
    ("alias,title,action\nHolmes,Sherlock Holmes,join\n", "line 2: action 'join' is not one of merge, never"),
    ("alias,title,action\nHolmes,,merge\n", "line 2: needs a name in both alias and title"),
    ("alias,title,action\nMr. Holmes,HOLMES,merge\n", "line 2: 'Mr. Holmes' and 'HOLMES' are one name"),
    ("alias,title,action\nHolmes,HOLMES.,never\n", "line 2: 'Holmes' and 'HOLMES.' differ only in case"),
    ("alias,title,action\nHolmes,Sherlock Holmes,merge\nHolmes,Mycroft Holmes,merge\n",
     "line 3: 'Holmes' is already merged into 'Sherlock Holmes' on an earlier line"),
    ("alias,title,action\nHolmes,Sherlock Holmes,merge\nSherlock Holmes,Holmes,never\n",
     "'Holmes' and 'Sherlock Holmes' are both merged and kept apart"),
])
def test_a_broken_overrides_file_names_the_file_line_and_fix(tmp_path, text, expected):
    # blank lines and a spreadsheet's empty rows are skipped, and still counted in line numbers
    with pytest.raises(ConfigError) as err:
        read_alias_overrides(overrides_file(tmp_path, text))
    assert expected in str(err.value) and "aliases.csv" in str(err.value)


def test_overrides_merge_across_types_and_keep_apart_what_the_rules_would_join(tmp_path):
    path = overrides_file(tmp_path, "alias,title,action,reason\nMiss Adler,Irene Adler,merge,\n"
                                    "watson,John Watson,never,wrong\nMoriarty,Holmes,merge,\n")
    raw = entities(("u1", "John Watson", "PERSON", "A doctor"), ("u1", "Watson", "PERSON", "Same?"),
                   ("u2", "Irene Adler", "PERSON", "A singer"), ("u2", "Miss Adler", "CONCEPT", "Typed wrongly"))
    rels = relationships(("u1", "Watson", "John Watson", "x", 1))
    assert "WATSON" not in set(merge_graph(raw, rels).entities["title"])  # what the rules do alone
    merged = merge_graph(raw, rels, overrides=read_alias_overrides(path))
    assert sorted(merged.entities["title"]) == ["IRENE ADLER", "JOHN WATSON", "WATSON"]
    assert merged.aliases.set_index("alias").loc["MISS ADLER", "reason"] == "merged by the overrides file"
    assert merged.entities.set_index("title").loc["IRENE ADLER", "type"] == "PERSON"  # the name merged into
    assert merged.overrides_not_applied == ["merge Moriarty -> Holmes: Moriarty and Holmes not in the graph"]


def test_a_name_kept_apart_from_its_canonical_leaves_even_through_a_chain():
    from graphrag_lite.alias_overrides import AliasOverrides

    keep_apart = AliasOverrides(never=frozenset({frozenset({"NORTHWIND", "NORTHWIND LOGISTICS GROUP"})}))
    merged = merge_graph(
        entities(("u1", "Northwind Logistics Group", "ORGANIZATION", "A"), ("u1", "Northwind Logistics",
                                                                              "ORGANIZATION", "B"),
                 ("u1", "Northwind", "ORGANIZATION", "C")), relationships(), overrides=keep_apart)
    assert sorted(merged.entities["title"]) == ["NORTHWIND", "NORTHWIND LOGISTICS GROUP"]


def test_review_merges_write_overrides_and_rerun_only_from_merge_graph(tmp_path, cli):
    root = tmp_path / "holmes"
    (root / "input").mkdir(parents=True)
    (root / "input" / "story.txt").write_text(STORY * 6, encoding="utf-8")
    write_settings(root, "chunking:\n  size: 120\n  overlap: 10\n")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    listing = cli("aliases", "--root", root, "--csv", root / "aliases.csv")
    assert listing.exit_code == 0 and "WATSON" in listing.output and "longer person's name" in listing.output
    written = pd.read_csv(root / "aliases.csv")
    assert list(written.columns) == ["alias", "title", "action", "reason"] and set(written["action"]) == {"merge"}
    # the user disagrees with one merge: flips it to `never` and names the file in the settings
    watson = written["alias"].str.endswith("WATSON")  # Watson and Dr. Watson are one name: one line
    assert watson.sum() == 1
    written.loc[watson, "action"] = "never"
    written.to_csv(root / "aliases.csv", index=False)
    write_settings(root, "chunking:\n  size: 120\n  overlap: 10\nentity_resolution:\n  overrides: aliases.csv\n")
    rerun = cli("index", "--root", root, "--method", "fast")
    assert rerun.exit_code == 0
    assert "= extract_graph_nlp: unchanged" in rerun.output and "✓ merge_graph" in rerun.output
    titles = set(pd.read_parquet(root / "output" / "entities.parquet")["title"])
    assert "JOHN WATSON" in titles and ({"WATSON", "DR WATSON"} & titles)
    assert cli("aliases", "--root", root, "--ambiguous").exit_code == 0
    # listing again into the same file keeps the user's lines: the `never` stays
    again = cli("aliases", "--root", root, "--csv", root / "aliases.csv")
    assert again.exit_code == 0 and "lines it already had, kept: 1" in again.output
    assert "never" in set(pd.read_csv(root / "aliases.csv")["action"])
    assert cli("aliases", "--root", root, "--csv", root / "no" / "such" / "dir.csv").exit_code == 2
    code, report = check_index(root / "output", "--method", "fast")
    assert code == 0, report


def test_a_missing_overrides_file_is_an_error_before_indexing(tmp_path, cli):
    root = tmp_path / "p"
    (root / "input").mkdir(parents=True)
    (root / "input" / "story.txt").write_text(STORY, encoding="utf-8")
    write_settings(root, "entity_resolution:\n  overrides: missing.csv\n")
    result = cli("index", "--root", root, "--method", "fast")
    assert result.exit_code == 2 and "missing.csv cannot be read" in result.output
    assert not (root / "output").exists()


def test_spreadsheet_habits_are_read_and_a_non_utf8_file_is_named(tmp_path):
    read = read_alias_overrides(overrides_file(tmp_path, "Alias , Title,ACTION,reason\n\"Holmes, Mr.\",Sherlock "
                                                         "Holmes, Merge ,x\n,,,\n"))
    assert read.merge == {"HOLMES MR": "SHERLOCK HOLMES"}
    (tmp_path / "latin.csv").write_bytes("alias,title,action\nZo\xeb,Zo\xeb Smith,merge\n".encode("cp1252"))
    with pytest.raises(ConfigError, match=r"latin\.csv: not UTF-8 text; save it as CSV UTF-8"):
        read_alias_overrides(tmp_path / "latin.csv")


def test_a_users_merge_is_never_the_one_undone_for_a_rules_merge_and_loops_are_refused():
    from graphrag_lite.alias_overrides import AliasOverrides

    rows = entities(("u1", "Irene Adler", "PERSON", "A singer"), ("u1", "Miss Adler", "PERSON", "Same"),
                    ("u1", "Adler", "PERSON", "Who?"))
    # the user merges Adler into Irene Adler and keeps Adler apart from Miss Adler: the rule's merge of Miss Adler
    # into Irene Adler is the one that goes
    keep = AliasOverrides({"ADLER": "IRENE ADLER"}, frozenset({frozenset({"ADLER", "MISS ADLER"})}))
    merged = merge_graph(rows, relationships(), overrides=keep)
    node = dict(zip(merged.aliases["alias"], merged.aliases["title"], strict=True))
    assert node["ADLER"] == "IRENE ADLER" and "MISS ADLER" in set(merged.entities["title"])
    # a user's merge into the short name turns the rules' chain round instead of swapping descriptions
    short = AliasOverrides({"NORTHWIND LOGISTICS GROUP": "NORTHWIND"})
    chain = entities(("u1", "Northwind Logistics Group", "ORGANIZATION", "the group"),
                     ("u1", "Northwind Logistics", "ORGANIZATION", "a shipper"), ("u1", "Northwind", "ORGANIZATION",
                                                                                  "short"))
    merged = merge_graph(chain, relationships(), overrides=short)
    assert len(merged.entities) <= 2 and "NORTHWIND LOGISTICS GROUP" not in set(merged.entities["title"])
    descriptions = {d for ds in merged.entities["descriptions"] for d in ds}
    assert descriptions == {"the group", "a shipper", "short"}
    northwind = merged.entities.set_index("title").loc["NORTHWIND", "descriptions"]
    assert {"the group", "short"} <= set(northwind)


def test_a_never_line_separates_two_names_that_normalize_alike(tmp_path):
    # in this text the bare "Kessler" is the mayor, Astrid, not Mr. (Erik) Kessler
    raw = entities(("u1", "Mr. Kessler", "PERSON", "Erik, the harbour master"),
                   ("u1", "Kessler", "PERSON", "The mayor"), ("u2", "Kessler", "PERSON", "The mayor again"),
                   ("u2", "Lindholm", "GEO", "A town"))
    rels = relationships(("u2", "Kessler", "Lindholm", "mayor of", 2), ("u1", "Mr. Kessler", "Kessler", "x", 1))
    assert merge_graph(raw, rels).entities["title"].tolist() == ["KESSLER", "LINDHOLM"]  # normalization joins them
    path = overrides_file(tmp_path, "alias,title,action\nKessler,Mr. Kessler,never\n")
    merged = merge_graph(raw, rels, overrides=read_alias_overrides(path))
    table = merged.entities.set_index("title")
    assert list(table.index) == ["KESSLER", "LINDHOLM", "MR. KESSLER"]
    assert table.loc["MR. KESSLER", "descriptions"] == ["Erik, the harbour master"]
    assert set(zip(merged.relationships["source"], merged.relationships["target"], strict=True)) == {
        ("KESSLER", "LINDHOLM"), ("MR. KESSLER", "KESSLER")}
