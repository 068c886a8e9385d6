"""Errors a user can act on. The CLI prints their message as one line (the traceback only with --verbose)."""

from __future__ import annotations

import shlex
from pathlib import Path


class GraphragLiteError(Exception):
    """Base class: the message says what is wrong and what to do."""

    exit_code = 1


class ConfigError(GraphragLiteError):
    """settings.yaml, .env or a --set override is wrong."""

    exit_code = 2


class InputError(GraphragLiteError):
    """The input documents cannot be used (for example: none is readable)."""

    exit_code = 2


class PipelineError(GraphragLiteError):
    """A pipeline file or a stage cannot run as asked."""


class PipelineFileError(PipelineError):
    """A pipeline name or file that is wrong (a configuration error)."""

    exit_code = 2


class UnknownStage(PipelineError):
    """A command names a stage the pipeline does not have (a usage error)."""

    exit_code = 2


class IndexIncomplete(GraphragLiteError):
    """The run finished, but items failed (text units, summaries, reports) or nothing was extracted: the
    tables are written and the finished work is kept; the same command retries what failed."""

    exit_code = 4


class MissingIndex(GraphragLiteError):
    """A command that reads an index finds none, or a part of one missing: build it with `graphrag-lite index`."""

    exit_code = 2


def index_command(root: Path, *flags: str) -> str:
    """The command that builds the index of the project in `root`, as a message quotes it."""
    return " ".join(["graphrag-lite index --root", shlex.quote(str(root)), *flags])


class OutputLocked(GraphragLiteError):
    """Another run is writing to the same output folder."""

    exit_code = 5


class OutputUnwritable(GraphragLiteError):
    """A file of the output folder cannot be written (disk full, read-only, no permission): nothing already
    committed is lost; the same command resumes once it can write."""

    exit_code = 2


class IndexDamaged(GraphragLiteError):
    """A file of the index is missing, damaged or does not match what the index recorded (`path`: the file).
    `graphrag-lite index` repairs it from what is intact and from the answer cache."""

    exit_code = 6

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


# Exit codes of the command line, one per cause (docs/indexing.md, "Exit codes"):
# 0 done; 1 unexpected error; 2 configuration, input or missing index; 3 budget reached;
# 4 finished with failed items, or stopped because too many failed; 5 output folder in use; 6 the index is
# damaged (a file missing or changed: `graphrag-lite index` repairs it); 130 interrupted.
