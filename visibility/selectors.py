"""Reads of the visibility app: the attribute registry, and listing and counting runs by a filter."""

from __future__ import annotations

import uuid

from visibility import registry
from visibility.backends import backend
from visibility.backends.base import Record
from visibility.query import ast
from visibility.query.parser import QueryError, parse
from visibility.query.resolve import resolve
from visibility.search_attributes import SYSTEM, SaType

MAX_PAGE_SIZE = 1000


def search_attributes_of(*, namespace_id: uuid.UUID) -> tuple[dict[str, SaType], dict[str, SaType]]:
    """The system attributes and the namespace's custom ones, by name."""
    return dict(SYSTEM), dict(registry.custom_types(namespace_id))


def filter_parse(*, namespace_id: uuid.UUID, query: str, count: bool = False) -> ast.Query:
    """The resolved AST of a filter in this namespace.

    Raises:
        QueryError: the filter is malformed, names an unknown attribute or compares it wrongly.
    """
    parsed = parse(query)
    names = set()
    stack: list[ast.Node] = [parsed.where] if parsed.where is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, ast.And | ast.Or):
            stack.extend(node.items)
        elif isinstance(node, ast.Not):
            stack.append(node.item)
        else:
            names.add(node.attr.name)
    names.update(t.attr.name for t in parsed.order_by)
    registered = registry.custom_attributes(namespace_id, names=names)
    return resolve(parsed, registered.types, count=count, slots=registered.slots)


def _page(
    namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes, *, scan: bool
) -> tuple[list[Record], bytes]:
    resolved = filter_parse(namespace_id=namespace_id, query=query)
    size = page_size if 0 < page_size <= MAX_PAGE_SIZE else MAX_PAGE_SIZE
    read = backend().scan_page if scan else backend().list_page
    try:
        return read(namespace_id, resolved, page_size=size, page_token=page_token)
    except ValueError as e:
        raise QueryError(f"invalid page token: {e}") from None


def execution_list(
    *, namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes
) -> tuple[list[Record], bytes]:
    """A page of the namespace's runs matching `query`, and the next page's token.

    Raises:
        QueryError: a bad filter or page token.
    """
    return _page(namespace_id, query, page_size, page_token, scan=False)


def execution_scan(
    *, namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes
) -> tuple[list[Record], bytes]:
    """A page of a scan: every matching run once over all pages, in no promised order.

    Raises:
        QueryError: a bad filter or page token.
    """
    return _page(namespace_id, query, page_size, page_token, scan=True)


def execution_count(*, namespace_id: uuid.UUID, query: str) -> tuple[int, list[tuple[int, int]]]:
    """How many of the namespace's runs match `query` (and per ExecutionStatus with GROUP BY).

    Raises:
        QueryError: a bad filter.
    """
    resolved = filter_parse(namespace_id=namespace_id, query=query, count=True)
    return backend().count(namespace_id, resolved)
