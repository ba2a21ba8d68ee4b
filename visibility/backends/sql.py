"""The SQL visibility backend (SQLite in dev, Postgres in production): records, filters compiled to SQL.

Every statement is parameterised: names of system attributes map to a fixed set of columns, names of
custom attributes and every literal travel as parameters, so no filter text ever reaches the SQL.
Every query is scoped by namespace first.

Filters are compiled in negation normal form: NOT is pushed down to the comparisons (De Morgan, then
each comparison's complement), so each comparison is true only for a run that has the attribute and
matches. A comparison on a missing attribute is then false instead of SQL's unknown, which changes no
result (an AND/OR tree without NOT is true exactly when it would be under three-valued logic), and it
lets equality on custom attributes use jsonb containment (`@>`) and so the GIN index on Postgres.

A custom attribute with a slot (visibility.slots) is compared on its typed slot column instead, which
holds the same value as the JSON document, or NULL where the run has none: the same semantics, served
by the slot's partial index.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db import connection as default_connection
from django.db.backends.base.base import BaseDatabaseWrapper

from visibility.backends.base import VisibilityBackend
from visibility.query import ast
from visibility.query.memory import text_tokens
from visibility.search_attributes import COLUMNS, SaType
from visibility.slots import COLUMNS as SLOT_COLUMNS
from visibility.slots import SLOT_TYPES, slot_value

TABLE = "visibility_visibilityrecord"
MAX_SORT = 2**63 - 1
"""close_sort of a run that has not closed: open runs come first in the default order."""

_NOT_NULL = frozenset(c.column for c in COLUMNS.values() if not c.nullable)
_FLIP = {"=": "!=", "!=": "=", ">": "<=", ">=": "<", "<": ">=", "<=": ">"}

RECORD_COLUMNS = (
    "execution_id",
    "namespace_id",
    "workflow_id",
    "run_id",
    "workflow_type",
    "task_queue",
    "status",
    "start_time",
    "execution_time",
    "close_time",
    "close_sort",
    "execution_duration",
    "history_length",
    "history_size_bytes",
    "state_transition_count",
    "parent_workflow_id",
    "parent_run_id",
    "root_workflow_id",
    "root_run_id",
    "first_run_id",
    "memo",
    "search_attributes",
    "custom",
)


@dataclass(frozen=True, slots=True)
class Record:
    """One run as visibility stores it (times in microseconds since the epoch, duration in nanoseconds)."""

    execution_id: int
    namespace_id: uuid.UUID
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    status: int
    start_time: int
    execution_time: int
    close_time: int | None
    execution_duration: int | None
    history_length: int
    history_size_bytes: int
    state_transition_count: int
    parent_workflow_id: str | None
    parent_run_id: str | None
    root_workflow_id: str
    root_run_id: str
    first_run_id: str
    memo: bytes
    """Sealed by the caller."""
    search_attributes: bytes
    custom: dict[str, object]


def _uuid(value: uuid.UUID, connection: BaseDatabaseWrapper) -> object:
    return value if connection.features.has_native_uuid_field else value.hex


_SLOT_SQL_TYPES = {
    SaType.Keyword: "text",
    SaType.Int: "bigint",
    SaType.Double: "double precision",
    SaType.Bool: "boolean",
    SaType.Datetime: "bigint",
}
_SLOT_GUARD = (
    "CASE WHEN EXISTS (SELECT 1 FROM visibility_customsearchattribute a "
    "WHERE a.namespace_id = %s AND a.name = %s AND a.slot = %s) THEN {value} END"
)


def _slot_values(
    record: Record, slots: Mapping[str, str], connection: BaseDatabaseWrapper
) -> tuple[list[str], list[object]]:
    """The placeholders and parameters of every slot column (in SLOT_COLUMNS order) for one record.

    A slot gets its attribute's value only while the attribute still holds that slot in the database
    (checked in the statement): a mapping cached before a RemoveSearchAttributes elsewhere cannot put a
    removed attribute's value into a slot that a later attribute reuses.
    """
    postgres = connection.vendor == "postgresql"
    by_slot = {slot: name for name, slot in slots.items() if slot in SLOT_TYPES}
    placeholders: list[str] = []
    params: list[object] = []
    for slot in SLOT_COLUMNS:
        name = by_slot.get(slot)
        value = slot_value(slot, record.custom.get(name)) if name is not None else None
        if value is None:
            placeholders.append("NULL")
            continue
        typed = f"CAST(%s AS {_SLOT_SQL_TYPES[SLOT_TYPES[slot]]})" if postgres else "%s"
        placeholders.append(_SLOT_GUARD.format(value=typed))
        params += [_uuid(record.namespace_id, connection), name, slot, value]
    return placeholders, params


def record_upsert_txn(
    record: Record, connection: BaseDatabaseWrapper | None = None, *, slots: Mapping[str, str] | None = None
) -> None:
    """Write a run's record (insert or replace), inside the caller's transaction.

    Args:
        record: the record.
        connection: the database (the default one unless given).
        slots: the namespace's slot column of each custom attribute that has one, by name
            (visibility.registry); the slot columns of the others are cleared.
    """
    connection = connection or default_connection
    custom = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    slot_placeholders, slot_params = _slot_values(record, slots or {}, connection)
    placeholders = ", ".join(
        [*(custom if c == "custom" else "%s" for c in RECORD_COLUMNS), *slot_placeholders]
    )
    columns = (*RECORD_COLUMNS, *SLOT_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns[1:])
    params = [
        record.execution_id,
        _uuid(record.namespace_id, connection),
        record.workflow_id,
        record.run_id,
        record.workflow_type,
        record.task_queue,
        record.status,
        record.start_time,
        record.execution_time,
        record.close_time,
        record.close_time if record.close_time is not None else MAX_SORT,
        record.execution_duration,
        record.history_length,
        record.history_size_bytes,
        record.state_transition_count,
        record.parent_workflow_id,
        record.parent_run_id,
        record.root_workflow_id,
        record.root_run_id,
        record.first_run_id,
        record.memo,
        record.search_attributes,
        json.dumps(record.custom, separators=(",", ":")),
        *slot_params,
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} ({', '.join(columns)}) VALUES ({placeholders}) "
            f"ON CONFLICT (execution_id) DO UPDATE SET {updates}",
            params,
        )


# A slot's value from the JSON document, NULL unless the stored JSON value has the slot's type (a name
# registered again with another type may still hold values of the old one). Parameters: the name
# (Postgres) or its JSON path (SQLite), once per placeholder.
_FROM_JSON_POSTGRES = {
    SaType.Keyword: "CASE WHEN jsonb_typeof(custom -> %s) = 'string' THEN custom ->> %s END",
    SaType.Bool: "CASE WHEN jsonb_typeof(custom -> %s) = 'boolean' THEN (custom ->> %s)::boolean END",
    SaType.Double: (
        "CASE WHEN jsonb_typeof(custom -> %s) = 'number' THEN CASE WHEN abs((custom ->> %s)::numeric) < 1e300 "
        "THEN (custom ->> %s)::double precision END END"
    ),
    SaType.Int: (
        "CASE WHEN jsonb_typeof(custom -> %s) = 'number' THEN CASE WHEN scale((custom ->> %s)::numeric) = 0 "
        "AND (custom ->> %s)::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 "
        "THEN (custom ->> %s)::bigint END END"
    ),
}
_FROM_JSON_POSTGRES[SaType.Datetime] = _FROM_JSON_POSTGRES[SaType.Int]
_FROM_JSON_SQLITE = {
    SaType.Keyword: "CASE WHEN json_type(custom, %s) = 'text' THEN json_extract(custom, %s) END",
    SaType.Bool: "CASE json_type(custom, %s) WHEN 'true' THEN 1 WHEN 'false' THEN 0 END",
    SaType.Double: (
        "CASE WHEN json_type(custom, %s) IN ('integer', 'real') THEN CAST(json_extract(custom, %s) AS REAL) END"
    ),
    SaType.Int: "CASE WHEN json_type(custom, %s) = 'integer' THEN json_extract(custom, %s) END",
}
_FROM_JSON_SQLITE[SaType.Datetime] = _FROM_JSON_SQLITE[SaType.Int]


def slots_fill_txn(
    namespace_id: uuid.UUID, slots: Mapping[str, str], connection: BaseDatabaseWrapper | None = None
) -> int:
    """Set slot columns of every record of a namespace from the JSON documents, inside the caller's
    transaction: each slot to its attribute's value there, or NULL where the record has none.

    One statement for all the slots, so no record is rewritten twice. Returns how many records changed.

    Args:
        namespace_id: the namespace.
        slots: the slot of each attribute, by name.

    Raises:
        ValueError: not a slot column.
    """
    connection = connection or default_connection
    postgres = connection.vendor == "postgresql"
    sets: list[str] = []
    wheres: list[str] = []
    params: list[object] = []
    where_params: list[object] = []
    for name, slot in slots.items():
        if slot not in SLOT_TYPES:
            raise ValueError(f"not a slot column: {slot!r}")
        value = (_FROM_JSON_POSTGRES if postgres else _FROM_JSON_SQLITE)[SLOT_TYPES[slot]]
        key = name if postgres else _Compiler._path(name)
        sets.append(f"{slot} = {value}")
        params += [key] * value.count("%s")
        present = "(custom -> %s) IS NOT NULL" if postgres else "json_type(custom, %s) IS NOT NULL"
        wheres += [f"{slot} IS NOT NULL", present]
        where_params.append(key)
    if not sets:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET {', '.join(sets)} WHERE namespace_id = %s AND ({' OR '.join(wheres)})",
            [*params, _uuid(namespace_id, connection), *where_params],
        )
        return int(cursor.rowcount)


def slot_clear_txn(namespace_id: uuid.UUID, slot: str, connection: BaseDatabaseWrapper | None = None) -> int:
    """Empty one slot column in every record of a namespace, inside the caller's transaction; how many.

    Raises:
        ValueError: not a slot column.
    """
    if slot not in SLOT_TYPES:
        raise ValueError(f"not a slot column: {slot!r}")
    connection = connection or default_connection
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET {slot} = NULL WHERE namespace_id = %s AND {slot} IS NOT NULL",
            [_uuid(namespace_id, connection)],
        )
        return int(cursor.rowcount)


# --- compiling filters ------------------------------------------------------------------------------


def negation_normal_form(node: ast.Node, negate: bool = False) -> ast.Node:
    """The same filter with NOT only inside comparisons (see the module docstring)."""
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


class _Compiler:
    def __init__(self, postgres: bool) -> None:
        self.pg = postgres
        self.params: list[object] = []

    def p(self, value: object) -> str:
        self.params.append(value)
        return "%s"

    @staticmethod
    def _slot(attr: ast.Attr) -> str | None:
        """The attribute's slot column: one of the fixed list (visibility.slots), of the attribute's type."""
        if attr.column is None and attr.slot is not None and SLOT_TYPES.get(attr.slot) == attr.type:
            return attr.slot
        return None

    @classmethod
    def _column(cls, attr: ast.Attr) -> str | None:
        """The typed column holding the attribute: a system column or the attribute's slot."""
        return attr.column if attr.column is not None else cls._slot(attr)

    # The expression of an attribute's value, typed for comparison.
    def expr(self, attr: ast.Attr) -> str:
        column = self._column(attr)
        if column is not None:
            return f"v.{column}"
        if self.pg:
            # Another namespace may hold a value of another type under the same name, and Postgres may
            # test this before the namespace condition: cast only values of the right JSON type.
            cast = {SaType.Int: "numeric", SaType.Datetime: "numeric", SaType.Double: "double precision"}
            if attr.type == SaType.Bool:
                return self._guarded_cast(attr.name, "boolean", "boolean")
            if attr.type in cast:
                return self._guarded_cast(attr.name, "number", cast[attr.type])
            return f"(v.custom ->> {self.p(attr.name)})"
        return f"json_extract(v.custom, {self.p(self._path(attr.name))})"

    def _guarded_cast(self, name: str, json_type: str, sql_type: str) -> str:
        kind = self.p(name)
        value = self.p(name)
        return (
            f"(CASE WHEN jsonb_typeof(v.custom -> {kind}) = '{json_type}' "
            f"THEN (v.custom ->> {value})::{sql_type} END)"
        )

    @staticmethod
    def _path(name: str) -> str:
        return '$."' + name + '"'

    def _present(self, attr: ast.Attr) -> str:
        column = self._column(attr)
        if column is not None:
            return f"v.{column} IS NOT NULL"
        if self.pg:
            return f"(v.custom -> {self.p(attr.name)}) IS NOT NULL"
        return f"json_type(v.custom, {self.p(self._path(attr.name))}) IS NOT NULL"

    def _contains(self, attr: ast.Attr, value: object) -> str:
        """The run has this attribute with this value (or, for a KeywordList, among its values)."""
        if self._column(attr) is None and self.pg and attr.type != SaType.Text:
            wrapped = [value] if attr.type == SaType.KeywordList else value
            return f"v.custom @> CAST({self.p(json.dumps({attr.name: wrapped}))} AS jsonb)"
        if attr.type == SaType.KeywordList:
            return (
                f"EXISTS (SELECT 1 FROM json_each(v.custom, {self.p(self._path(attr.name))}) "
                f"WHERE value = {self.p(value)})"
            )
        return f"{self.expr(attr)} = {self._literal(attr, value)}"

    def _literal(self, attr: ast.Attr, value: object) -> str:
        if attr.type == SaType.Bool and not self.pg:
            return self.p(1 if value else 0)
        return self.p(value)

    def _text(self, attr: ast.Attr, query: str) -> str:
        tokens = text_tokens(query)
        if not tokens:
            return "1 = 0"
        if self.pg:
            return (
                f"regexp_split_to_array(lower({self.expr(attr)}), '[^[:alnum:]]+') "
                f"@> CAST({self.p(tokens)} AS text[])"
            )
        return f"perdura_text_match({self.expr(attr)}, {self.p(query)}) = 1"

    def _ordered(self, attr: ast.Attr, op: str, value: object) -> str:
        left = self.expr(attr)
        if self.pg and attr.type == SaType.Keyword and attr.column != "status" and self._slot(attr) is None:
            # Code-point order, as SQLite's BINARY and Python's str (the slot columns' own collation).
            left = f'{left} COLLATE "C"'
        if attr.column == "close_time":
            # close_sort is close_time on a closed run, so the same bound on it changes nothing and lets
            # the indexes that end in the default order (close_sort, ...) range-scan a CloseTime window.
            bound = f"{left} {op} {self._literal(attr, value)}"
            return f"({bound} AND v.close_sort {op} {self._literal(attr, value)})"
        return f"{left} {op} {self._literal(attr, value)}"

    def node(self, node: ast.Node) -> str:
        if isinstance(node, ast.And):
            return "(" + " AND ".join(self.node(n) for n in node.items) + ")"
        if isinstance(node, ast.Or):
            return "(" + " OR ".join(self.node(n) for n in node.items) + ")"
        assert not isinstance(node, ast.Not), "compile the negation normal form"
        attr = node.attr
        if isinstance(node, ast.IsNull):
            present = self._present(attr)
            return present if node.negated else f"NOT ({present})"
        if isinstance(node, ast.Compare):
            if attr.type == SaType.Text:
                if node.op == "=":
                    return self._text(attr, str(node.value))
                present = self._present(attr)  # parameters are taken in the order they appear
                return f"({present} AND NOT ({self._text(attr, str(node.value))}))"
            if node.op == "=":
                return self._contains(attr, node.value)
            if node.op == "!=" and attr.type == SaType.KeywordList:
                return f"({self._present(attr)} AND NOT ({self._contains(attr, node.value)}))"
            if node.op == "!=":
                return f"{self.expr(attr)} <> {self._literal(attr, node.value)}"
            return self._ordered(attr, node.op, node.value)
        if isinstance(node, ast.In):
            if not node.values:
                return "1 = 0"
            if node.negated:
                return (
                    f"({self._present(attr)} AND NOT ("
                    + " OR ".join(self._contains(attr, v) for v in node.values)
                    + "))"
                )
            column = self._column(attr)
            if column is not None:
                return f"v.{column} IN ({', '.join(self._literal(attr, v) for v in node.values)})"
            return "(" + " OR ".join(self._contains(attr, v) for v in node.values) + ")"
        if isinstance(node, ast.Between):
            present = self._present(attr) if node.negated else ""
            inside = f"{self._ordered(attr, '>=', node.low)} AND {self._ordered(attr, '<=', node.high)}"
            return f"({present} AND NOT ({inside}))" if node.negated else f"({inside})"
        assert isinstance(node, ast.StartsWith)
        present = self._present(attr) if node.negated else ""
        if self.pg:
            escaped = node.prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            hit = f"{self.expr(attr)} LIKE {self.p(escaped + '%')}"
        else:
            hit = f"substr({self.expr(attr)}, 1, {self.p(len(node.prefix))}) = {self.p(node.prefix)}"
        return f"({present} AND NOT ({hit}))" if node.negated else hit


@dataclass(frozen=True, slots=True)
class Compiled:
    where: str
    params: list[object]


def compile_filter(
    namespace_id: uuid.UUID, query: ast.Query, connection: BaseDatabaseWrapper | None = None
) -> Compiled:
    """The WHERE clause (table alias `v`) selecting the namespace's runs that match a resolved filter."""
    connection = connection or default_connection
    compiler = _Compiler(connection.vendor == "postgresql")
    clause = f"v.namespace_id = {compiler.p(_uuid(namespace_id, connection))}"
    if query.where is not None:
        clause += " AND " + compiler.node(negation_normal_form(query.where))
    return Compiled(clause, compiler.params)


# --- reading ----------------------------------------------------------------------------------------

SELECT_COLUMNS = tuple(c for c in RECORD_COLUMNS if c != "close_sort")


def _record(row: Sequence[object]) -> Record:
    values = dict(zip(SELECT_COLUMNS, row, strict=True))
    custom = values["custom"]
    if isinstance(custom, str):
        custom = json.loads(custom)
    values["custom"] = custom or {}
    values["memo"] = bytes(values["memo"] or b"")  # type: ignore[arg-type]
    values["search_attributes"] = bytes(values["search_attributes"] or b"")  # type: ignore[arg-type]
    ns = values["namespace_id"]
    values["namespace_id"] = ns if isinstance(ns, uuid.UUID) else uuid.UUID(str(ns))
    return Record(**values)  # type: ignore[arg-type]


def _encode_token(data: dict[str, object]) -> bytes:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode())


def _decode_token(token: bytes) -> dict[str, object]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token))
    except ValueError:
        raise ValueError("invalid page token") from None
    if not isinstance(data, dict):
        raise ValueError("invalid page token")
    return data


def list_records(
    namespace_id: uuid.UUID,
    query: ast.Query,
    *,
    page_size: int,
    page_token: bytes,
    connection: BaseDatabaseWrapper | None = None,
) -> tuple[list[Record], bytes]:
    """A page of matching runs and the token of the next page (empty after the last).

    The default order is Temporal's: open runs first, then by close time, start time, newest first.
    Its token is the last row's sort key, so pages stay stable while runs start and close. An explicit
    ORDER BY pages by offset.

    Raises:
        ValueError: a page token this listing did not make.
    """
    connection = connection or default_connection
    compiled = compile_filter(namespace_id, query, connection)
    where, params = compiled.where, list(compiled.params)
    state = _decode_token(page_token) if page_token else {}
    columns = ", ".join(f"v.{c}" for c in SELECT_COLUMNS)
    if query.order_by:
        order_compiler = _Compiler(connection.vendor == "postgresql")
        terms = []
        for term in query.order_by:
            expr = order_compiler.expr(term.attr)
            # NULLS LAST only where NULL can occur: Postgres matches `DESC` (not `DESC NULLS LAST`) to a
            # descending index, and does not look at NOT NULL to tell them apart.
            nulls = "" if term.attr.column in _NOT_NULL else " NULLS LAST"
            terms.append(f"{expr} {'DESC' if term.descending else 'ASC'}{nulls}")
        order = ", ".join([*terms, "v.execution_id DESC"])
        offset = int(state.get("offset", 0))  # type: ignore[call-overload]
        sql = f"SELECT {columns} FROM {TABLE} v WHERE {where} ORDER BY {order} LIMIT %s OFFSET %s"
        params = [*params, *order_compiler.params, page_size + 1, offset]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        records = [_record(r) for r in rows[:page_size]]
        token = _encode_token({"offset": offset + page_size}) if len(rows) > page_size else b""
        return records, token
    if state:
        try:
            key = [int(state["c"]), int(state["s"]), int(state["e"])]  # type: ignore[call-overload]
        except (KeyError, TypeError, ValueError):
            raise ValueError("invalid page token") from None
        where += " AND (v.close_sort, v.start_time, v.execution_id) < (%s, %s, %s)"
        params += key
    sql = (
        f"SELECT {columns}, v.close_sort FROM {TABLE} v WHERE {where} "
        "ORDER BY v.close_sort DESC, v.start_time DESC, v.execution_id DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, page_size + 1])
        rows = cursor.fetchall()
    records = [_record(r[:-1]) for r in rows[:page_size]]
    token = b""
    if len(rows) > page_size:
        last = rows[page_size - 1]
        token = _encode_token({"c": last[-1], "s": records[-1].start_time, "e": records[-1].execution_id})
    return records, token


def count_records(
    namespace_id: uuid.UUID, query: ast.Query, connection: BaseDatabaseWrapper | None = None
) -> tuple[int, list[tuple[int, int]]]:
    """How many runs match, and with GROUP BY ExecutionStatus the (status, count) of each group."""
    connection = connection or default_connection
    compiled = compile_filter(namespace_id, query, connection)
    with connection.cursor() as cursor:
        if query.group_by:
            cursor.execute(
                f"SELECT v.status, COUNT(*) FROM {TABLE} v WHERE {compiled.where} GROUP BY v.status "
                "ORDER BY COUNT(*) DESC, v.status",
                compiled.params,
            )
            groups = [(int(status), int(n)) for status, n in cursor.fetchall()]
            return sum(n for _, n in groups), groups
        cursor.execute(f"SELECT COUNT(*) FROM {TABLE} v WHERE {compiled.where}", compiled.params)
        return int(cursor.fetchone()[0]), []


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
