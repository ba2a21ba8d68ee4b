"""Filters restricted to one division of a namespace's runs: its workflows, or its standalone activities.

A standalone activity's record is its host run's (visibility.divisions): its WorkflowId is the activity id
behind a prefix and its WorkflowType the activity type. An activity filter names them ActivityId and
ActivityType; both kinds of filter are narrowed to their own division before they are resolved.
"""

from __future__ import annotations

from dataclasses import replace

from visibility.divisions import ACTIVITY_PREFIX
from visibility.query import ast

_ACTIVITY_NAMES = {"ActivityId": "WorkflowId", "ActivityType": "WorkflowType"}


def _prefixed(value: ast.Literal) -> ast.Literal:
    return ACTIVITY_PREFIX + value if isinstance(value, str) else value


def _activity_node(node: ast.Node) -> ast.Node:
    if isinstance(node, ast.And):
        return ast.And(tuple(_activity_node(n) for n in node.items))
    if isinstance(node, ast.Or):
        return ast.Or(tuple(_activity_node(n) for n in node.items))
    if isinstance(node, ast.Not):
        return ast.Not(_activity_node(node.item))
    name = _ACTIVITY_NAMES.get(node.attr.name)
    if name is None:
        return node
    attr = replace(node.attr, name=name)
    if name != "WorkflowId":
        return replace(node, attr=attr)
    if isinstance(node, ast.Compare):
        return ast.Compare(attr, node.op, _prefixed(node.value))
    if isinstance(node, ast.In):
        return ast.In(attr, tuple(_prefixed(v) for v in node.values), node.negated)
    if isinstance(node, ast.Between):
        return ast.Between(attr, _prefixed(node.low), _prefixed(node.high), node.negated)
    if isinstance(node, ast.StartsWith):
        return ast.StartsWith(attr, ACTIVITY_PREFIX + node.prefix, node.negated)
    return replace(node, attr=attr)


def restrict(query: ast.Query, *, activities: bool) -> ast.Query:
    """The parsed filter narrowed to workflow runs, or (`activities`) to standalone activities with their
    attribute names mapped onto the host runs' records."""
    where = query.where
    order_by = query.order_by
    if activities:
        where = _activity_node(where) if where is not None else None
        order_by = tuple(
            replace(t, attr=replace(t.attr, name=_ACTIVITY_NAMES.get(t.attr.name, t.attr.name)))
            for t in order_by
        )
    division = ast.StartsWith(ast.Attr("WorkflowId", 0), ACTIVITY_PREFIX, negated=not activities)
    return ast.Query(
        where=division if where is None else ast.And((where, division)),
        group_by=query.group_by,
        order_by=order_by,
    )
