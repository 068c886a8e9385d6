"""Import the large libraries (LiteLLM, LanceDB) on first use, with the cyclic garbage collector paused.

Their imports make hundreds of thousands of long-lived objects (classes, pydantic models, tables), and the
full collections these allocations trigger meanwhile walk them all and free next to nothing: 0.4-0.5 s of
LiteLLM's 1.7 s import, and 0.05-0.1 s of LanceDB's. Paused, an index run and a cold query start their
first model call that much sooner. Reference counting still frees what the imports drop; the few cycles
they leave are collected after, as usual.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
from collections.abc import Iterator
from types import ModuleType


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No collections while the block runs (a program that disabled them keeps them disabled)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def import_large(name: str) -> ModuleType:
    """`import name`, without collections while it runs (once imported, it is only looked up)."""
    with collector_paused():
        return importlib.import_module(name)
