"""The filter AST: what the parser produces and every backend (and the in-memory evaluator) consumes."""

from __future__ import annotations

from dataclasses import dataclass, field

from visibility.search_attributes import SaType

Literal = str | int | float | bool


@dataclass(frozen=True, slots=True)
class Attr:
    """A search attribute a filter names, with its type once resolved (None straight from the parser)."""

    name: str
    position: int
    """1-based position of the name in the query text, for error messages."""
    type: SaType | None = None
    column: str | None = None
    """The typed column of a system attribute; None for attributes kept in the JSON document."""
    slot: str | None = None
    """The namespace's slot column holding this custom attribute (visibility.slots), if it has one.

    Only the SQL backend reads it; the JSON document holds the same values, and is what other backends
    and the in-memory evaluator see.
    """


@dataclass(frozen=True, slots=True)
class Compare:
    """`attr op value`, op one of = != > >= < <=."""

    attr: Attr
    op: str
    value: Literal


@dataclass(frozen=True, slots=True)
class In:
    attr: Attr
    values: tuple[Literal, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Between:
    attr: Attr
    low: Literal
    high: Literal
    negated: bool = False


@dataclass(frozen=True, slots=True)
class StartsWith:
    attr: Attr
    prefix: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull:
    attr: Attr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class And:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    item: Node


Node = Compare | In | Between | StartsWith | IsNull | And | Or | Not
Leaf = Compare | In | Between | StartsWith | IsNull


@dataclass(frozen=True, slots=True)
class OrderBy:
    attr: Attr
    descending: bool = False


@dataclass(frozen=True, slots=True)
class Query:
    """A whole filter: the condition (None: every run), GROUP BY attributes and ORDER BY terms."""

    where: Node | None = None
    group_by: tuple[Attr, ...] = ()
    order_by: tuple[OrderBy, ...] = field(default=())
