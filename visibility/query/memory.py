"""Evaluate a resolved filter over one record in memory, with SQL's three-valued logic.

The reference semantics every backend must agree with (the property tests hold them to it): a
comparison on an attribute the run does not have is unknown (None), NOT of unknown stays unknown, and
a run matches only when the whole filter is true.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from visibility.query import ast
from visibility.search_attributes import SaType

_WORD = re.compile(r"[^\W_]+")


def text_tokens(text: str) -> list[str]:
    """The words of a Text value or query, lower-cased: what a Text `=` matches on."""
    return _WORD.findall(text.lower())


def text_match(value: str, query: str) -> bool:
    """Text `=`: every word of the query appears among the value's words."""
    wanted = text_tokens(query)
    if not wanted:
        return False
    have = set(text_tokens(value))
    return all(w in have for w in wanted)


def _compare(t: SaType | None, value: object, op: str, literal: object) -> bool:
    if t == SaType.KeywordList:
        assert isinstance(value, list)
        return (literal in value) if op == "=" else (literal not in value)
    if t == SaType.Text:
        assert isinstance(value, str)
        assert isinstance(literal, str)
        return text_match(value, literal) if op == "=" else not text_match(value, literal)
    if op == "=":
        return value == literal
    if op == "!=":
        return value != literal
    if op == ">":
        return value > literal  # type: ignore[operator]  # resolve gave literal the attribute's type
    if op == ">=":
        return value >= literal  # type: ignore[operator]  # resolve gave literal the attribute's type
    if op == "<":
        return value < literal  # type: ignore[operator]  # resolve gave literal the attribute's type
    return value <= literal  # type: ignore[operator]  # resolve gave literal the attribute's type


def evaluate(node: ast.Node, record: Mapping[str, object]) -> bool | None:
    """True, False or None (unknown) for one record: stored values by attribute name (missing = absent)."""
    if isinstance(node, ast.And):
        results = [evaluate(n, record) for n in node.items]
        if False in results:
            return False
        return None if None in results else True
    if isinstance(node, ast.Or):
        results = [evaluate(n, record) for n in node.items]
        if True in results:
            return True
        return None if None in results else False
    if isinstance(node, ast.Not):
        inner = evaluate(node.item, record)
        return None if inner is None else not inner
    value = record.get(node.attr.name)
    if isinstance(node, ast.IsNull):
        return (value is not None) if node.negated else (value is None)
    if value is None:
        return None
    t = node.attr.type
    if isinstance(node, ast.Compare):
        return _compare(t, value, node.op, node.value)
    if isinstance(node, ast.In):
        if t == SaType.KeywordList:
            assert isinstance(value, list)
            hit = any(v in value for v in node.values)
        else:
            hit = value in node.values
        return not hit if node.negated else hit
    if isinstance(node, ast.Between):
        inside = node.low <= value <= node.high  # type: ignore[operator]  # bounds of the attribute's type (resolve)
        return not inside if node.negated else inside
    assert isinstance(node, ast.StartsWith)
    assert isinstance(value, str)
    hit = value.startswith(node.prefix)
    return not hit if node.negated else hit


def matches(query: ast.Query, record: Mapping[str, object]) -> bool:
    return query.where is None or evaluate(query.where, record) is True
