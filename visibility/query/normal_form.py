"""Negation normal form of a filter: NOT pushed down into the comparisons, as every backend compiles it.

De Morgan's laws move NOT through AND and OR, then each comparison takes its complement (`=` becomes
`!=`, IN becomes NOT IN, ...). Each comparison of the result is true only for a run that has the
attribute and matches, so a comparison on a missing attribute is false instead of unknown; that changes
no result (an AND/OR tree without NOT is true exactly when it would be under three-valued logic), and it
lets a backend compile each comparison alone.
"""

from __future__ import annotations

from visibility.query import ast

_FLIP = {"=": "!=", "!=": "=", ">": "<=", ">=": "<", "<": ">=", "<=": ">"}


def negation_normal_form(node: ast.Node, negate: bool = False) -> ast.Node:
    """The same filter with NOT only inside comparisons."""
    if isinstance(node, ast.Not):
        return negation_normal_form(node.item, not negate)
    if isinstance(node, ast.And | ast.Or):
        items = tuple(negation_normal_form(n, negate) for n in node.items)
        if negate:
            return ast.Or(items) if isinstance(node, ast.And) else ast.And(items)
        return type(node)(items)
    if not negate:
        return node
    if isinstance(node, ast.Compare):
        return ast.Compare(node.attr, _FLIP[node.op], node.value)
    if isinstance(node, ast.In):
        return ast.In(node.attr, node.values, not node.negated)
    if isinstance(node, ast.Between):
        return ast.Between(node.attr, node.low, node.high, not node.negated)
    if isinstance(node, ast.StartsWith):
        return ast.StartsWith(node.attr, node.prefix, not node.negated)
    assert isinstance(node, ast.IsNull)
    return ast.IsNull(node.attr, not node.negated)
