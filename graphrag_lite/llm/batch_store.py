"""OUTPUT/llm_batches.json, the batch file: the provider batches a run sent whose answers no run has taken
yet (a stopped run's next run re-attaches to them instead of sending their calls again)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from graphrag_lite.storage import read_json, write_json
from graphrag_lite.words import counted

BATCH_FILE = "llm_batches.json"


class BatchStore:
    """OUTPUT/llm_batches.json: the batches sent and not delivered yet, with the custom_ids each holds."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        return read_json(self.path) if self.path.is_file() else {"batches": []}

    def entries(self) -> list[dict[str, Any]]:
        return list(self._read()["batches"])

    def add(self, entry: dict[str, Any]) -> None:
        data = self._read()
        data["batches"].append(entry)
        write_json(self.path, data)

    def remove(self, batch_id: str) -> None:
        data = self._read()
        data["batches"] = [entry for entry in data["batches"] if entry["id"] != batch_id]
        write_json(self.path, data)

    def forget(self) -> list[dict[str, Any]]:
        """Drop every batch kept (after a run that finished: no call waits for them); returns them."""
        data = self._read()
        dropped, data["batches"] = data["batches"], []
        if dropped:
            write_json(self.path, data)
        return dropped


def pending(output_dir: Path) -> list[dict[str, Any]]:
    """The batches an earlier run sent whose answers no run has taken yet."""
    return BatchStore(output_dir / BATCH_FILE).entries()


def describe_run(counts: dict[str, dict[str, int]]) -> str:
    """One line on what a run sent by batch and online."""
    total: Counter[str] = sum(map(Counter, counts.values()), Counter())
    reattached = f", {total['reattached']} re-attached" if total["reattached"] else ""
    return (f"Batch mode: {counted(total['batched'], 'call')} answered by batch ({counted(total['sent'], 'batch')} "
            f"sent{reattached}) at the batch price; {counted(total['online'], 'chat call')} went online (failed in "
            "their batch, or a model without a batch API); corrective follow-ups after unusable answers and "
            "embeddings always go online")
