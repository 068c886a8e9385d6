"""The package's version, in a module of its own: every layer may read it without importing the package's
front door (graphrag_lite/__init__.py), which offers the query engine and the API."""

__version__ = "0.1.0"
