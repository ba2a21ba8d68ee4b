"""Temporal's list-filter language: parsed once into an AST (parser), checked against the registry (resolve)."""
