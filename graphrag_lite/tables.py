"""Small helpers over pandas tables."""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

import numpy as np
import pandas as pd


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain dicts with string keys (typed, unlike itertuples)."""
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def plain_json(value: Any) -> Any:
    """A value from a table as plain JSON: numpy scalars and arrays unwrapped, NaN and NA as None, dates
    in ISO form, anything else as its text."""
    if isinstance(value, dict):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [plain_json(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str | bool | int):
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)
