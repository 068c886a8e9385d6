"""Errors a user can act on. The CLI prints their message as one line (the traceback only with --verbose)."""


class GraphragLiteError(Exception):
    """Base class: the message says what is wrong and what to do."""

    exit_code = 1


class ConfigError(GraphragLiteError):
    """settings.yaml, .env or a --set override is wrong."""

    exit_code = 2


class InputError(GraphragLiteError):
    """The input documents cannot be used (for example: none is readable)."""


class PipelineError(GraphragLiteError):
    """A pipeline file or a stage cannot run as asked."""
