"""Where the benchmarks find the team's shared corpora: $GRAPHRAG_LITE_SHARED, else `shared/` beside the
checkout (../shared from the repository root)."""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("GRAPHRAG_LITE_SHARED") or Path(__file__).resolve().parents[2] / "shared")


def shared_path(relative: str) -> Path:
    """A file or folder of the shared data, or an error that says where it was looked for and how to point
    the benchmarks elsewhere."""
    path = SHARED / relative
    if not path.exists():
        raise SystemExit(f"{path} not found: the benchmarks read the shared corpora from {SHARED}; set "
                         "GRAPHRAG_LITE_SHARED to the folder that holds corpora/")
    return path
