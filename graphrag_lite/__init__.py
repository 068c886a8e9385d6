"""graphrag-lite: documents to a knowledge-graph index, and local, global and basic search over it."""

import logging

from graphrag_lite._offline import configure_offline_environment
from graphrag_lite.version import __version__

configure_offline_environment()
# a library's log goes where the application sends it (an index run: OUTPUT/logs/index.log), never to stderr
logging.getLogger("graphrag_lite").addHandler(logging.NullHandler())

__all__ = ["GraphRAG", "SearchResult", "__version__", "build_index", "run_experiment"]


def __getattr__(name: str) -> object:
    """`from graphrag_lite import GraphRAG` without loading the query stack for the CLI's other commands."""
    if name in ("GraphRAG", "SearchResult"):
        from graphrag_lite.query import engine

        return getattr(engine, name)
    if name == "build_index":
        from graphrag_lite import api

        return api.build_index
    if name == "run_experiment":
        from graphrag_lite.experiment import run

        return run.run_experiment
    raise AttributeError(name)
