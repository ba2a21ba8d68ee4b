"""The SQL visibility backend (SQLite in dev, Postgres in production): list, count and scan runs.

Reads the records (visibility.backends.sql.records) with filters compiled by
visibility.backends.sql.compiler.
"""

from __future__ import annotations

import uuid

from django.db import connection as default_connection
from django.db.backends.base.base import BaseDatabaseWrapper

from visibility.backends.base import (
    Record,
    VisibilityBackend,
    check_intervals,
    decode_page_token,
    encode_page_token,
)
from visibility.backends.sql.compiler import Compiler, compile_filter
from visibility.backends.sql.records import SELECT_COLUMNS, TABLE, record_from_row
from visibility.query import ast
from visibility.search_attributes import COLUMNS

_NOT_NULL = frozenset(c.column for c in COLUMNS.values() if not c.nullable)


def list_records(
    namespace_id: uuid.UUID,
    query: ast.Query,
    *,
    page_size: int,
    page_token: bytes,
    connection: BaseDatabaseWrapper | None = None,
    table: str = TABLE,
) -> tuple[list[Record], bytes]:
    """A page of matching runs and the token of the next page (empty after the last); `table` the live
    records or the archive index (ARCHIVE_TABLE).

    The default order is Temporal's: open runs first, then by close time, start time, newest first.
    Its token is the last row's sort key, so pages stay stable while runs start and close. An explicit
    ORDER BY pages by offset.

    Raises:
        ValueError: a page token this listing did not make.
    """
    connection = connection or default_connection
    compiled = compile_filter(namespace_id, query, connection)
    where, params = compiled.where, list(compiled.params)
    state = decode_page_token(page_token) if page_token else {}
    columns = ", ".join(f"v.{c}" for c in SELECT_COLUMNS)
    if query.order_by:
        order_compiler = Compiler(connection.vendor == "postgresql")
        terms = []
        for term in query.order_by:
            expr = order_compiler.expr(term.attr)
            # NULLS LAST only where NULL can occur: Postgres matches `DESC` (not `DESC NULLS LAST`) to a
            # descending index, and does not look at NOT NULL to tell them apart.
            nulls = "" if term.attr.column in _NOT_NULL else " NULLS LAST"
            terms.append(f"{expr} {'DESC' if term.descending else 'ASC'}{nulls}")
        order = ", ".join([*terms, "v.execution_id DESC"])
        offset = int(state.get("offset", 0))
        sql = f"SELECT {columns} FROM {table} v WHERE {where} ORDER BY {order} LIMIT %s OFFSET %s"
        params = [*params, *order_compiler.params, page_size + 1, offset]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        records = [record_from_row(r) for r in rows[:page_size]]
        token = encode_page_token({"offset": offset + page_size}) if len(rows) > page_size else b""
        return records, token
    if state:
        try:
            key = [int(state["c"]), int(state["s"]), int(state["e"])]
        except (KeyError, TypeError, ValueError):
            raise ValueError("invalid page token") from None
        where += " AND (v.close_sort, v.start_time, v.execution_id) < (%s, %s, %s)"
        params += key
    sql = (
        f"SELECT {columns}, v.close_sort FROM {table} v WHERE {where} "
        "ORDER BY v.close_sort DESC, v.start_time DESC, v.execution_id DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, page_size + 1])
        rows = cursor.fetchall()
    records = [record_from_row(r[:-1]) for r in rows[:page_size]]
    token = b""
    if len(rows) > page_size:
        last = rows[page_size - 1]
        token = encode_page_token({"c": last[-1], "s": records[-1].start_time, "e": records[-1].execution_id})
    return records, token


def count_records(
    namespace_id: uuid.UUID,
    query: ast.Query,
    connection: BaseDatabaseWrapper | None = None,
    table: str = TABLE,
) -> tuple[int, list[tuple[int, int]]]:
    """How many runs match, and with GROUP BY ExecutionStatus the (status, count) of each group."""
    connection = connection or default_connection
    compiled = compile_filter(namespace_id, query, connection)
    with connection.cursor() as cursor:
        if query.group_by:
            cursor.execute(
                f"SELECT v.status, COUNT(*) FROM {table} v WHERE {compiled.where} GROUP BY v.status "
                "ORDER BY COUNT(*) DESC, v.status",
                compiled.params,
            )
            groups = [(int(status), int(n)) for status, n in cursor.fetchall()]
            return sum(n for _, n in groups), groups
        cursor.execute(f"SELECT COUNT(*) FROM {table} v WHERE {compiled.where}", compiled.params)
        return int(cursor.fetchone()[0]), []


_INTERVAL_COLUMNS = {"StartTime": "start_time", "CloseTime": "close_time"}


def count_records_by_interval(
    namespace_id: uuid.UUID,
    query: ast.Query,
    *,
    field: str,
    start: int,
    step: int,
    buckets: int,
    connection: BaseDatabaseWrapper | None = None,
) -> list[int]:
    """Matching runs per interval of `field` (see VisibilityBackend.count_by_interval): one GROUP BY on
    the interval's index, integer division in both SQLite and Postgres."""
    check_intervals(field, step, buckets)
    connection = connection or default_connection
    compiled = compile_filter(namespace_id, query, connection)
    column = f"v.{_INTERVAL_COLUMNS[field]}"
    sql = (
        f"SELECT ({column} - %s) / %s, COUNT(*) FROM {TABLE} v WHERE {compiled.where} "
        f"AND {column} >= %s AND {column} < %s GROUP BY 1"
    )
    counts = [0] * buckets
    with connection.cursor() as cursor:
        cursor.execute(sql, [start, step, *compiled.params, start, start + step * buckets])
        for index, n in cursor.fetchall():
            counts[int(index)] += int(n)
    return counts


class SqlBackend(VisibilityBackend):
    """The SQL backend behind the common contract (scan is a listing in the default order)."""

    name = "sql"

    def __init__(self, connection: BaseDatabaseWrapper | None = None) -> None:
        self.connection = connection

    def list_page(
        self, namespace_id: uuid.UUID, query: ast.Query, *, page_size: int, page_token: bytes
    ) -> tuple[list[Record], bytes]:
        return list_records(
            namespace_id, query, page_size=page_size, page_token=page_token, connection=self.connection
        )

    def count(self, namespace_id: uuid.UUID, query: ast.Query) -> tuple[int, list[tuple[int, int]]]:
        return count_records(namespace_id, query, self.connection)

    def count_by_interval(
        self, namespace_id: uuid.UUID, query: ast.Query, *, field: str, start: int, step: int, buckets: int
    ) -> list[int]:
        return count_records_by_interval(
            namespace_id,
            query,
            field=field,
            start=start,
            step=step,
            buckets=buckets,
            connection=self.connection,
        )
