"""Scripted replies: a test says exactly what the fake model answers to a stage's calls, in the styles real
models answer, instead of what the fake computes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from graphrag_lite.fake.options import Options


class Script:
    """Scripted replies by the stage (and step) the gateway names: a test says exactly what the model
    answers, in the styles real models answer, instead of what the fake computes.

        extract_graph.extract: [first reply, second reply]   # stage.step, or just the stage
        community_reports: "one reply for every call"
        summarize_descriptions: [{content: "...", finish_reason: length}]

    Replies of a key are given in order; the last one repeats (a model that answers the same way). Steps:
    extract, glean and check (extraction stages), summarize, report, choose_alias, map, rate, next_hop and
    answer (queries), judge, embed (answers.ROUTES lists them). Calls with no script entry get the computed
    answer."""

    def __init__(self, replies: dict[str, Any] | None = None) -> None:
        self.replies = {k: v if isinstance(v, list) else [v] for k, v in (replies or {}).items()}
        self.served: dict[str, int] = {}

    def next(self, stage: str, step: str) -> tuple[str, str] | None:
        key = next((k for k in (f"{stage}.{step}", stage) if k in self.replies), None)
        if key is None:
            return None
        position = self.served.get(key, 0)
        self.served[key] = position + 1
        reply = self.replies[key][min(position, len(self.replies[key]) - 1)]
        if isinstance(reply, dict):
            return str(reply.get("content", "")), str(reply.get("finish_reason", "stop"))
        return str(reply), "stop"


SCRIPTS: dict[str, Script] = {"": Script()}  # by replies file; "" is the one `scripted` sets from Python


def current_script(options: Options) -> Script:
    if options.replies not in SCRIPTS:
        text = Path(options.replies).read_text(encoding="utf-8")
        SCRIPTS[options.replies] = Script(yaml.safe_load(text) or {})
    return SCRIPTS[options.replies]


@contextlib.contextmanager
def scripted(replies: dict[str, Any]) -> Iterator[Script]:
    """Answer with these replies (for models without a `replies=` file) while the block runs."""
    script = Script(replies)
    SCRIPTS[""] = script
    try:
        yield script
    finally:
        SCRIPTS[""] = Script()
