"""The house's rules that no import contract states (the layers and the circles are `make lint`'s, in
.importlinter): rooms of at most 600 lines, functions of at most 60, no private name taken from another module,
and a model-calling floor that knows no test double."""

from __future__ import annotations

import ast
import configparser
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
    long = {module_name(p): n for p in MODULES
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
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


def floors_above(room: str) -> set[str]:
    """The packages and modules on the floors above `room` (a child of graphrag_lite) in .importlinter's layers."""
    config = configparser.ConfigParser()
    config.read(REPO / ".importlinter")
    layers = [line.strip() for line in config["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]
    above = layers[:next(i for i, line in enumerate(layers) if room in (n.strip() for n in line.split("|")))]
    return {f"graphrag_lite.{name.strip()}" for line in above for name in line.split("|")}


def imported_modules(text: str) -> set[str]:
    """Every module of the package that `text` imports: `import a.b`, `from a.b import c` and, for
    `from graphrag_lite import x`, the module graphrag_lite.x."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("graphrag_lite")}


def test_the_model_calling_floor_knows_no_test_double_and_no_upper_floor():
    upper = floors_above("llm")
    assert {"graphrag_lite.extraction", "graphrag_lite.pipeline", "graphrag_lite.stages", "graphrag_lite.query",
            "graphrag_lite.fake"} <= upper
    for path in sorted((PACKAGE / "llm").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "fake/" not in text, f"{path.name} names the fake model: a provider plugs in (llm/providers.py)"
        reached = {name for name in imported_modules(text) for floor in upper
                   if name == floor or name.startswith(f"{floor}.")}
        assert not reached, (path.name, reached)
    # the check can fail: each way of importing an upper floor is seen
    probe = "import graphrag_lite.fake.provider\nfrom graphrag_lite import stages\n"
    assert {"graphrag_lite.fake.provider", "graphrag_lite.stages"} <= imported_modules(probe)
