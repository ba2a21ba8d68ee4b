"""Filters compiled to SQL: a WHERE clause over the visibility records (alias `v`), with its parameters.

Every statement is parameterised: names of system attributes map to a fixed set of columns, names of
custom attributes and every literal travel as parameters, so no filter text ever reaches the SQL.
Every query is scoped by namespace first.

Filters are compiled in negation normal form (visibility.query.normal_form), so each comparison is true
only for a run that has the attribute and matches; that lets equality on custom attributes use jsonb
containment (`@>`) and so the GIN index on Postgres.

A custom attribute with a slot (visibility.slots) is compared on its typed slot column instead, which
holds the same value as the JSON document, or NULL where the run has none: the same semantics, served
by the slot's partial index.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection as default_connection
from django.db.backends.base.base import BaseDatabaseWrapper

from visibility.backends.sql.records import db_uuid, json_path
from visibility.query import ast
from visibility.query.memory import text_tokens
from visibility.query.normal_form import negation_normal_form
from visibility.search_attributes import SaType
from visibility.slots import SLOT_TYPES


class Compiler:
    """Turns resolved filter nodes and attributes into SQL, collecting the parameters in order."""

    def __init__(self, postgres: bool) -> None:
        self.pg = postgres
        self.params: list[Any] = []

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
        return f"json_extract(v.custom, {self.p(json_path(attr.name))})"

    def _guarded_cast(self, name: str, json_type: str, sql_type: str) -> str:
        kind = self.p(name)
        value = self.p(name)
        return (
            f"(CASE WHEN jsonb_typeof(v.custom -> {kind}) = '{json_type}' "
            f"THEN (v.custom ->> {value})::{sql_type} END)"
        )

    def _present(self, attr: ast.Attr) -> str:
        column = self._column(attr)
        if column is not None:
            return f"v.{column} IS NOT NULL"
        if self.pg:
            return f"(v.custom -> {self.p(attr.name)}) IS NOT NULL"
        return f"json_type(v.custom, {self.p(json_path(attr.name))}) IS NOT NULL"

    def _contains(self, attr: ast.Attr, value: object) -> str:
        """The run has this attribute with this value (or, for a KeywordList, among its values)."""
        if self._column(attr) is None and self.pg and attr.type != SaType.Text:
            wrapped = [value] if attr.type == SaType.KeywordList else value
            return f"v.custom @> CAST({self.p(json.dumps({attr.name: wrapped}))} AS jsonb)"
        if attr.type == SaType.KeywordList:
            return (
                f"EXISTS (SELECT 1 FROM json_each(v.custom, {self.p(json_path(attr.name))}) "
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
    params: list[Any]


def compile_filter(
    namespace_id: uuid.UUID, query: ast.Query, connection: BaseDatabaseWrapper | None = None
) -> Compiled:
    """The WHERE clause (table alias `v`) selecting the namespace's runs that match a resolved filter."""
    connection = connection or default_connection
    compiler = Compiler(connection.vendor == "postgresql")
    clause = f"v.namespace_id = {compiler.p(db_uuid(namespace_id, connection))}"
    if query.where is not None:
        clause += " AND " + compiler.node(negation_normal_form(query.where))
    return Compiled(clause, compiler.params)
