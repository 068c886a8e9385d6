"""The house's rules that no import contract states (the layers and the circles are `make lint`'s, in
.importlinter): rooms of at most 600 lines, functions of at most 60, no private name taken from another module,
and a model-calling floor that knows no test double."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "graphrag_lite"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_imports(text: str, own: str) -> list[str]:
    """Each `from graphrag_lite.x import _y` of module `own` (its text), x another module than `own`."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("graphrag_lite") and node.module != own:
            found += [f"{own} imports {alias.name} from {node.module}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_module_is_over_600_lines():
    long = {module_name(p): n for p in MODULES if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not long, f"split these by job: {long}"


def test_no_function_is_over_60_lines():
    long = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{module_name(path)}.{node.name}: {lines} lines")
    assert not long, long


def test_no_private_name_is_imported_from_another_module():
    found = [line for path in MODULES for line in private_imports(path.read_text(encoding="utf-8"), module_name(path))]
    assert not found, found
    text = "from graphrag_lite.pipeline.runner import _run_locked\nfrom graphrag_lite.query.index import IndexTables\n"
    assert private_imports(text, "graphrag_lite.query.local") == [  # the check can fail
        "graphrag_lite.query.local imports _run_locked from graphrag_lite.pipeline.runner"]


def test_the_model_calling_floor_knows_no_test_double_and_no_upper_floor():
    for path in sorted((PACKAGE / "llm").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "fake/" not in text, f"{path.name} names the fake model: a provider plugs in (llm/providers.py)"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module:
                floor = node.module.split(".")[1] if node.module.startswith("graphrag_lite.") else ""
                assert floor not in ("extraction", "pipeline", "stages", "query", "fake"), (path.name, node.module)
