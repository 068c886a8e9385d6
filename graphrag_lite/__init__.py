"""graphrag-lite: documents to a knowledge-graph index, and local, global and basic search over it."""

from graphrag_lite._offline import configure_offline_environment

configure_offline_environment()

__version__ = "0.1.0"
