"""Check a parsed filter against the namespace's attributes: names exist, operators and values fit types.

Values come out in the visibility record's stored form (see visibility.search_attributes.decode_value),
so every backend and the in-memory evaluator compare like with like.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from visibility.query import ast
from visibility.query.parser import QueryError
from visibility.search_attributes import (
    COLUMNS,
    PREDEFINED,
    STATUS_NAMES,
    SaType,
    parse_datetime,
    to_micros,
)
from visibility.slots import slot_of

_RANGE = {">", ">=", "<", "<="}
_OPS: dict[SaType, set[str]] = {
    SaType.Keyword: {"=", "!=", *_RANGE, "in", "between", "starts_with", "is_null"},
    SaType.KeywordList: {"=", "!=", "in", "is_null"},
    SaType.Text: {"=", "!=", "is_null"},
    SaType.Int: {"=", "!=", *_RANGE, "in", "between", "is_null"},
    SaType.Double: {"=", "!=", *_RANGE, "in", "between", "is_null"},
    SaType.Bool: {"=", "!=", "is_null"},
    SaType.Datetime: {"=", "!=", *_RANGE, "in", "between", "is_null"},
}
_OP_NAMES = {"in": "IN", "between": "BETWEEN", "starts_with": "STARTS_WITH", "is_null": "IS NULL"}
_DURATION_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_CLOCK = re.compile(r"^(\d+):([0-5]\d):([0-5]\d)$")


def _go_type(value: ast.Literal) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    return "string"


def _shown(value: ast.Literal) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _wrong(attr: ast.Attr, value: ast.Literal) -> QueryError:
    assert attr.type is not None
    return QueryError(
        f"invalid query: invalid expression: invalid value type for search attribute {attr.name} of type "
        f"{attr.type.name}: {_shown(value)} (type: {_go_type(value)}) at position {attr.position}"
    )


def parse_duration(text: str) -> int:
    """Nanoseconds of a Go duration ('1h30m', '250ms') or an 'hh:mm:ss' clock reading.

    Raises:
        ValueError: neither.
    """
    clock = _CLOCK.match(text)
    if clock:
        h, m, s = (int(g) for g in clock.groups())
        return ((h * 60 + m) * 60 + s) * 10**9
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body == "0":
        return 0
    pos, total = 0, 0.0
    for match in _DURATION.finditer(body):
        if match.start() != pos:
            raise ValueError(text)
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(body) or not body:
        raise ValueError(text)
    return sign * int(total)


_INT64 = range(-(2**63), 2**63)


def _value(attr: ast.Attr, value: ast.Literal) -> ast.Literal:
    """The literal as the column holds it; an integer no 64-bit column can hold is refused here, not
    by the database (which raised an overflow: INTERNAL)."""
    result = _typed_value(attr, value)
    if isinstance(result, int) and not isinstance(result, bool) and result not in _INT64:
        raise QueryError(
            f"invalid query: invalid expression: the value of {attr.name} is out of the range of a "
            "64-bit integer"
        )
    return result


def _typed_value(attr: ast.Attr, value: ast.Literal) -> ast.Literal:
    t = attr.type
    if attr.name == "ExecutionStatus":
        if isinstance(value, str):
            if value not in STATUS_NAMES:
                raise QueryError(
                    f"invalid query: invalid expression: invalid ExecutionStatus value '{value}'"
                )
            return STATUS_NAMES[value]
        if isinstance(value, int) and not isinstance(value, bool) and value in STATUS_NAMES.values():
            return value
        raise QueryError(f"invalid query: invalid expression: invalid ExecutionStatus value '{value}'")
    if attr.name == "ExecutionDuration":
        if isinstance(value, str):
            try:
                return parse_duration(value)
            except ValueError:
                raise QueryError(
                    f"invalid query: invalid expression: invalid value for search attribute ExecutionDuration: "
                    f"'{value}' is neither a duration nor hh:mm:ss"
                ) from None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _wrong(attr, value)
    if t in (SaType.Keyword, SaType.KeywordList, SaType.Text):
        if isinstance(value, str):
            return value
    elif t == SaType.Int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif t == SaType.Double:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif t == SaType.Bool:
        if isinstance(value, bool):
            return value
    elif t == SaType.Datetime:
        if isinstance(value, str):
            try:
                return to_micros(parse_datetime(value))
            except ValueError:
                raise QueryError(
                    f"invalid query: invalid expression: unable to parse datetime '{value}'"
                ) from None
        if isinstance(value, int) and not isinstance(value, bool):
            return value // 1000  # Temporal reads an integer time as nanoseconds since the epoch
    raise _wrong(attr, value)


def _attr(attr: ast.Attr, custom: Mapping[str, SaType], slots: Mapping[str, str]) -> ast.Attr:
    column = COLUMNS.get(attr.name)
    if column is not None:
        return replace(attr, type=column.type, column=column.column)
    t = PREDEFINED.get(attr.name)
    if t is not None:
        return replace(attr, type=t)
    t = custom.get(attr.name)
    if t is None:
        raise QueryError(
            f"invalid query: invalid search attribute: {attr.name} (at position {attr.position})"
        )
    return replace(attr, type=t, slot=slot_of(attr.name, t, slots))


def _check_op(attr: ast.Attr, op: str) -> None:
    assert attr.type is not None
    if op not in _OPS[attr.type]:
        raise QueryError(
            f"invalid query: operation is not supported: operator '{_OP_NAMES.get(op, op)}' not supported "
            f"for {attr.type.name} type search attribute '{attr.name}' (at position {attr.position})"
        )


def _node(node: ast.Node, custom: Mapping[str, SaType], slots: Mapping[str, str]) -> ast.Node:
    if isinstance(node, ast.And):
        return ast.And(tuple(_node(n, custom, slots) for n in node.items))
    if isinstance(node, ast.Or):
        return ast.Or(tuple(_node(n, custom, slots) for n in node.items))
    if isinstance(node, ast.Not):
        return ast.Not(_node(node.item, custom, slots))
    attr = _attr(node.attr, custom, slots)
    if isinstance(node, ast.Compare):
        _check_op(attr, node.op)
        return ast.Compare(attr, node.op, _value(attr, node.value))
    if isinstance(node, ast.In):
        _check_op(attr, "in")
        return ast.In(attr, tuple(_value(attr, v) for v in node.values), node.negated)
    if isinstance(node, ast.Between):
        _check_op(attr, "between")
        return ast.Between(attr, _value(attr, node.low), _value(attr, node.high), node.negated)
    if isinstance(node, ast.StartsWith):
        _check_op(attr, "starts_with")
        return ast.StartsWith(attr, node.prefix, node.negated)
    _check_op(attr, "is_null")
    return ast.IsNull(attr, node.negated)


def resolve(
    query: ast.Query, custom: Mapping[str, SaType], *, count: bool, slots: Mapping[str, str] | None = None
) -> ast.Query:
    """The filter with every name typed and every value converted.

    Args:
        query: the parsed filter.
        custom: the namespace's custom attributes by name.
        count: whether this is a count (the only place GROUP BY is allowed).
        slots: the slot column of each custom attribute that has one (visibility.slots), by name;
            a slot of another type than the attribute's is ignored.

    Raises:
        QueryError: an unknown attribute, an operator its type lacks, a value of the wrong type, or a
            clause this kind of request does not take.
    """
    if query.group_by:
        if not count:
            raise QueryError(
                "invalid query: operation is not supported: 'GROUP BY' clause is only supported in count queries"
            )
        for attr in query.group_by:
            if attr.name != "ExecutionStatus":
                raise QueryError(
                    "invalid query: operation is not supported: 'GROUP BY' clause is not supported for "
                    f"search attribute {attr.name}"
                )
        if len(query.group_by) > 1:
            raise QueryError(
                "invalid query: operation is not supported: 'GROUP BY' clause supports only a single field"
            )
    if query.order_by and count:
        raise QueryError(
            "invalid query: operation is not supported: 'ORDER BY' clause is not supported in count queries"
        )
    slots = slots or {}
    order = []
    for term in query.order_by:
        attr = _attr(term.attr, custom, slots)
        if attr.type in (SaType.Text, SaType.KeywordList):
            raise QueryError(
                f"invalid query: operation is not supported: cannot sort by {attr.type.name} search attribute {attr.name}"
            )
        order.append(ast.OrderBy(attr, term.descending))
    return ast.Query(
        where=_node(query.where, custom, slots) if query.where is not None else None,
        group_by=tuple(_attr(a, custom, slots) for a in query.group_by),
        order_by=tuple(order),
    )
