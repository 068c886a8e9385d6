"""A GraphRAG user's first hour (issue 14): what `init` writes works as written."""

from __future__ import annotations

from pathlib import Path

from graphrag_lite.llm import fake
from graphrag_lite.project import prompt_settings
from tests.conftest import DATA


def fake_models(settings: str) -> str:
    """init's settings with its OpenAI models swapped for the fake provider (no key, no network)."""
    return settings.replace("model: openai/gpt-4o-mini", "model: fake/default").replace(
        "model: openai/text-embedding-3-small", "model: fake/embedding")


def test_init_wires_every_prompt_it_copies_and_an_edited_copy_is_the_prompt_used(tmp_path: Path, cli):
    root = tmp_path / "project"
    assert cli("init", root).exit_code == 0
    settings = (root / "settings.yaml").read_text(encoding="utf-8")
    copied = {p.name for p in (root / "prompts").glob("*.txt")}
    assert copied == set(prompt_settings().values())  # every prompt setting has its copy, and no copy is idle
    for name in copied:
        assert f": prompts/{name}  #" in settings, name
    (root / "settings.yaml").write_text(fake_models(settings), encoding="utf-8")
    for document in sorted((DATA / "unrelated-documents").glob("*.txt"))[:2]:
        (root / "input" / document.name).write_bytes(document.read_bytes())
    assert cli("index", "--root", root).exit_code == 0
    prompt = root / "prompts" / "community_report.txt"
    prompt.write_text(prompt.read_text(encoding="utf-8") + "\nWrite in a calm voice (edited).\n", encoding="utf-8")
    fake.STATS.reset()
    rerun = cli("index", "--root", root)
    assert rerun.exit_code == 0, rerun.output
    assert "= extract_graph: unchanged" in rerun.output and "= summarize_descriptions: unchanged" in rerun.output
    assert "✓ community_reports" in rerun.output
    assert any("Write in a calm voice (edited)." in m for m in fake.STATS.first_messages), rerun.output
