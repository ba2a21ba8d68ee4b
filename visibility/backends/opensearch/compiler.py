"""Filters compiled to OpenSearch's query DSL, and the sort of a listing.

Every query filters on the namespace first, so no filter can see another namespace. Filters are
compiled in negation normal form (visibility.query.normal_form) like the SQL ones: each leaf is true
only for a run that has the attribute and matches, which gives the in-memory evaluator's three-valued
answers for whole filters.
"""

from __future__ import annotations

import uuid
from typing import Any

from visibility.backends.opensearch.documents import CUSTOM_TYPES, FIELDS, custom_field, field_name
from visibility.query import ast
from visibility.query.memory import text_tokens
from visibility.query.normal_form import negation_normal_form
from visibility.search_attributes import SaType


def _field(attr: ast.Attr) -> str:
    if attr.column is not None:
        return FIELDS[attr.column]
    assert attr.type is not None
    return custom_field(attr.name, attr.type)


_MATCH_NONE: dict[str, Any] = {"match_none": {}}
_RANGE = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}


def _exists(field: str) -> dict[str, Any]:
    return {"exists": {"field": field}}


def _present_and_not(field: str, query: dict[str, Any]) -> dict[str, Any]:
    """Has the attribute and `query` is false: a negated leaf of the negation normal form."""
    return {"bool": {"filter": [_exists(field)], "must_not": [query]}}


def _text(attr: ast.Attr, words: str) -> dict[str, Any]:
    """Text `=`: every word of `words` is among the value's (the words the document carries, split
    by the same function as the in-memory evaluator's, so no analyzer can disagree with it)."""
    tokens = text_tokens(words)
    if not tokens:
        return _MATCH_NONE
    field = f"Words.{field_name(attr.name)}"
    return {"bool": {"filter": [{"term": {field: t}} for t in dict.fromkeys(tokens)]}}


def _bound(field: str, op: str, value: object) -> dict[str, Any]:
    """One side of a range. The empty string is the least keyword, and a range with it as a bound is
    not reliably honoured (osmem treats it as no bound), so those comparisons are spelled out."""
    if value == "":
        if op == "<":
            return _MATCH_NONE
        if op == "<=":
            return {"term": {field: ""}}
        if op == ">=":
            return _exists(field)
        return _present_and_not(field, {"term": {field: ""}})
    return {"range": {field: {_RANGE[op]: value}}}


def _leaf(node: ast.Leaf) -> dict[str, Any]:
    attr = node.attr
    field = _field(attr)
    if isinstance(node, ast.IsNull):
        return _exists(field) if node.negated else {"bool": {"must_not": [_exists(field)]}}
    if isinstance(node, ast.Compare):
        if attr.type == SaType.Text:
            hit = _text(attr, str(node.value))
            return hit if node.op == "=" else _present_and_not(field, hit)
        if node.op == "=":
            return {"term": {field: node.value}}
        if node.op == "!=":
            return _present_and_not(field, {"term": {field: node.value}})
        return _bound(field, node.op, node.value)
    if isinstance(node, ast.In):
        if not node.values:
            return _MATCH_NONE
        hit = {"terms": {field: list(node.values)}}
        return _present_and_not(field, hit) if node.negated else hit
    if isinstance(node, ast.Between):
        hit = {"bool": {"filter": [_bound(field, ">=", node.low), _bound(field, "<=", node.high)]}}
        return _present_and_not(field, hit) if node.negated else hit
    assert isinstance(node, ast.StartsWith)
    hit = {"prefix": {field: node.prefix}} if node.prefix else _exists(field)
    return _present_and_not(field, hit) if node.negated else hit


def _node(node: ast.Node) -> dict[str, Any]:
    if isinstance(node, ast.And):
        return {"bool": {"filter": [_node(n) for n in node.items]}}
    if isinstance(node, ast.Or):
        return {"bool": {"should": [_node(n) for n in node.items], "minimum_should_match": 1}}
    assert not isinstance(node, ast.Not), "compile the negation normal form"
    return _leaf(node)


def compile_filter(namespace_id: uuid.UUID, query: ast.Query) -> dict[str, Any]:
    """The query DSL selecting the namespace's runs that match a resolved filter (filter context only:
    no scoring)."""
    clauses: list[dict[str, Any]] = [{"term": {"NamespaceId": str(namespace_id)}}]
    if query.where is not None:
        clauses.append(_node(negation_normal_form(query.where)))
    return {"bool": {"filter": clauses}}


DEFAULT_SORT = [{"CloseSort": "desc"}, {"StartTime": "desc"}, {"ExecutionId": "desc"}]


def sort_of(query: ast.Query) -> list[dict[str, Any]]:
    if not query.order_by:
        return DEFAULT_SORT
    terms: list[dict[str, Any]] = []
    for term in query.order_by:
        assert term.attr.type is not None
        unmapped = CUSTOM_TYPES[term.attr.type]["type"]
        if term.attr.column == "status":
            unmapped = "integer"
        terms.append(
            {
                _field(term.attr): {
                    "order": "desc" if term.descending else "asc",
                    "missing": "_last",
                    "unmapped_type": unmapped,
                }
            }
        )
    return [*terms, {"ExecutionId": "desc"}]
