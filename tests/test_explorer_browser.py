"""The graph explorer page (`graphrag-lite serve`, at /) driven in a real headless Chromium: search, graph,
entity and community details, a local question with its cited rows, and no request leaving this machine."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from tests.conftest import DATA, REPO, make_project

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium (`apt-get install chromium`) to drive")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (Python) is not installed")

WAIT_MS = 60_000  # a bound, not a speed: on a busy 2-core machine a first answer can take seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def wait_until_up(base: str, server: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    """The server loads the index before it listens: poll /health, and tell why when it never comes up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"the server exited with {server.returncode}:\n{log.read_text()}")
        try:
            if get_json(f"{base}/health").get("status") == "ok":
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"the server did not answer /health in {timeout:.0f} s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """A small index of Operation Dulce (fake model, with claims) served on a free port: (base URL, project,
    server log)."""
    root = make_project(tmp_path_factory.mktemp("explorer"), [DATA / "operation-dulce" / "dulce.txt"],
                        settings="extract_claims:\n  enabled: true\n")  # claims too: the panel shows them
    result = CliRunner().invoke(app, ["index", "--root", str(root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    port, log = free_port(), root / "serve.log"
    with log.open("wb") as err:
        server = subprocess.Popen([sys.executable, "-m", "graphrag_lite", "serve", "--root", str(root),
                                   "--port", str(port)], stdout=err, stderr=err, cwd=REPO)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_up(base, server, log)
        yield base, root, log
    finally:
        server.kill()
        server.wait(timeout=10)


def artifacts_dir() -> Path:
    folder = Path(os.environ.get("GRAPHRAG_TEST_ARTIFACTS") or REPO / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def best_connected(root: Path) -> dict[str, Any]:
    """The entity with the second most relationships: it surely has neighbours to draw and a community, and
    it is not the one whose neighbourhood the page shows before any search."""
    entities = pd.read_parquet(root / "output" / "entities.parquet")
    return dict(entities.sort_values("degree", ascending=False, kind="stable").iloc[1])


def test_explorer_page_searches_draws_explains_and_cites(served: tuple[str, Path, Path]) -> None:
    base, root, log = served
    entity = best_connected(root)
    detail = get_json(f"{base}/entities/{entity['id']}")
    community = detail["communities"][0]["community"]
    report = get_json(f"{base}/communities/{community}")["report"]
    assert report, f"community {community} has no report to show"
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        requested: list[str] = []
        errors: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.set_default_timeout(WAIT_MS)
        try:
            explore(page, base, entity, detail, report["title"])
        except Exception:
            print("server log:\n" + log.read_text())  # pytest shows it with the failure
            raise
        finally:
            page.screenshot(path=str(artifacts_dir() / "explorer.png"))
            browser.close()
    outside = [url for url in requested if urlparse(url).scheme != "data" and urlparse(url).hostname != "127.0.0.1"]
    assert not outside, f"the page fetched from outside this machine: {outside}"
    assert {urlparse(url).path for url in requested} >= {"/", "/static/explorer.js", "/static/vendor/cytoscape.min.js"}
    assert not errors, f"errors in the browser console: {errors}"


def explore(page: Any, base: str, entity: dict[str, Any], detail: dict[str, Any], report_title: str) -> None:
    expect = sync_api.expect
    expect.set_options(timeout=WAIT_MS)  # assertions wait as long as the page's own actions may (default: 5 s)
    page.goto(f"{base}/")
    expect(page.get_by_test_id("server-status")).to_have_text("Connected")
    page.wait_for_function("Number(document.getElementById('graph-count').dataset.nodes) > 1")  # before a search
    expect(page.locator("[data-testid=graph-count]")).not_to_contain_text(entity["title"])
    # the search box has focus on load and answers as one types
    page.get_by_label("Entity name").press_sequentially(entity["title"].title(), delay=20)
    page.locator(f'[data-testid="search-result"][data-entity-id="{entity["id"]}"]').click()

    page.wait_for_function("Number(document.getElementById('graph-count').dataset.nodes) > 1")
    drawn = page.evaluate("window.cy.nodes().map(n => n.id())")
    assert entity["id"] in drawn and len(drawn) > 1, drawn
    expect(page.get_by_test_id("details-title")).to_have_text(entity["title"])
    expect(page.get_by_test_id("entity-description")).to_contain_text(entity["description"][:60])
    neighbour = next(r["other_id"] for r in detail["relationships"])
    expect(page.locator("[data-testid=graph-count]")).to_contain_text(entity["title"])
    assert neighbour in drawn
    expect(page.get_by_test_id("entity-relationships")).to_be_visible()
    if detail["claims"]:
        expect(page.get_by_test_id("entity-claims")).to_contain_text(detail["claims"][0]["description"])
    expect(page.get_by_test_id("entity-sources")).to_contain_text(detail["text_units"][0]["document_title"])

    community = detail["communities"][0]["community"]
    page.locator(f'[data-testid="entity-community"][data-community="{community}"]').click()
    expect(page.get_by_test_id("community-title")).to_have_text(report_title)
    expect(page.get_by_test_id("community-members")).to_contain_text(entity["title"])

    page.get_by_label("Question", exact=True).fill(f"Who is {entity['title']} and what do they do?")
    page.get_by_test_id("method-local").check()
    page.get_by_test_id("ask-button").click()
    cited = page.locator(".cited")
    expect(cited.first).to_be_visible()
    expect(page.locator(f'.cited[data-cite-kind="Entities"][data-cite-id="{entity["human_readable_id"]}"]'))\
        .to_be_visible()
    assert page.evaluate("window.cy.nodes('.cited').length") >= 1  # the entity asked about, lit in the graph
    # the answer's "[Data: Entities (n)]" markers became links to those rows
    expect(page.locator('#answer-text .cite-ref[data-cite-kind="Entities"]').first).to_be_visible()

    # the keyboard path: ↓ from the search box into the results, Enter opens one
    search = page.get_by_label("Entity name")
    search.fill("")  # the earlier search's results go first: ↓ must not land in a list about to be replaced
    expect(page.get_by_test_id("search-result")).to_have_count(0)
    search.fill(entity["title"][:4])
    first = page.get_by_test_id("search-result").first
    first.wait_for()
    search.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("tab-details")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_test_id("details-title")).to_have_text(first.locator(".title").inner_text())
    page.get_by_test_id("tab-answer").click()  # the screenshot shows the answer beside the graph
