"""A user's corrections to entity resolution (entity_resolution.overrides) and `graphrag-lite aliases`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from graphrag_lite.errors import ConfigError
from graphrag_lite.graph.merge import merge_graph
from graphrag_lite.graph.overrides import read_alias_overrides
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
    ("alias,title\nHolmes,Sherlock Holmes\n", "no action column; the first line must name the columns"),
    ("alias,title,action\nHolmes,Sherlock Holmes,join\n", "line 2: action 'join' is not one of merge, never"),
    ("alias,title,action\nHolmes,,merge\n", "line 2: needs a name in both alias and title"),
    ("alias,title,action\nMr. Holmes,HOLMES,never\n", "line 2: 'Mr. Holmes' and 'HOLMES' are one name"),
    ("alias,title,action\nHolmes,Sherlock Holmes,merge\nHolmes,Mycroft Holmes,merge\n",
     "line 3: 'Holmes' is already merged into 'Sherlock Holmes' on an earlier line"),
    ("alias,title,action\nHolmes,Sherlock Holmes,merge\nSherlock Holmes,Holmes,never\n",
     "'Holmes' and 'Sherlock Holmes' are both merged and kept apart"),
])
def test_a_broken_overrides_file_names_the_file_line_and_fix(tmp_path, text, expected):
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
    assert merged.overrides_not_applied == ["merge Moriarty -> Holmes: Moriarty and Holmes not in the graph"]


def test_a_name_kept_apart_from_its_canonical_leaves_even_through_a_chain():
    from graphrag_lite.graph.overrides import AliasOverrides

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
