"""Small helpers over pandas tables."""

from __future__ import annotations

from typing import Any

import pandas as pd


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain dicts with string keys (typed, unlike itertuples)."""
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]
