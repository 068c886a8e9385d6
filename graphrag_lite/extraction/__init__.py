"""Parsing and running LLM extraction of entities, relationships and claims."""
