"""Parse a list filter (`WorkflowType = 'x' AND StartTime > '...' ORDER BY ...`) into the AST with lark."""

from __future__ import annotations

import functools

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from visibility.query import ast


class QueryError(ValueError):
    """A filter Temporal would not accept: the message names the position and the problem."""


# The WHERE-clause subset of SQL that Temporal's visibility accepts, plus its STARTS_WITH.
# Keywords are case-insensitive; names are plain identifiers or `backquoted`; strings take
# single or double quotes (a quote doubled, or backslash-escaped, stands for itself).
_GRAMMAR = r"""
    start: [expr] [group_by] [order_by] [limit]

    ?expr: or_expr
    ?or_expr: and_expr (_OR and_expr)*
    ?and_expr: not_expr (_AND not_expr)*
    ?not_expr: _NOT not_expr -> not_
             | predicate
    ?predicate: "(" expr ")"
              | name COMP_OP value                          -> compare
              | name NOT_KW? _IN "(" value ("," value)* ")" -> in_
              | name NOT_KW? _BETWEEN value _AND value      -> between
              | name NOT_KW? _STARTS_WITH value             -> starts_with
              | name _IS NOT_KW? _NULL                      -> is_null

    group_by: _GROUP _BY name ("," name)*
    order_by: _ORDER _BY order_term ("," order_term)*
    order_term: name DIRECTION?
    limit: LIMIT_KW INT

    name: NAME | BACKQUOTED
    ?value: STRING -> string
          | SIGNED_NUMBER -> number
          | TRUE -> true
          | FALSE -> false

    COMP_OP: "!=" | "<>" | ">=" | "<=" | "=" | ">" | "<"
    _OR: "or"i
    _AND: "and"i
    _NOT: "not"i
    NOT_KW: "not"i
    _IN: "in"i
    _BETWEEN: "between"i
    _STARTS_WITH: "starts_with"i
    _IS: "is"i
    _NULL: "null"i
    _GROUP: "group"i
    _ORDER: "order"i
    _BY: "by"i
    LIMIT_KW: "limit"i
    DIRECTION: "asc"i | "desc"i
    TRUE: "true"i
    FALSE: "false"i

    NAME: /[A-Za-z_][A-Za-z0-9_]*/
    BACKQUOTED: /`[^`]+`/
    STRING: /'(?:[^'\\]|\\.|'')*'/ | /"(?:[^"\\]|\\.|"")*"/
    INT: /[0-9]+/
    SIGNED_NUMBER: /[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?/

    %import common.WS
    %ignore WS
"""

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "Z": "\x1a"}


def _unquote(text: str) -> str:
    quote, body = text[0], text[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        elif ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_FLIP = {"<>": "!="}


@v_args(inline=True)
class _ToAst(Transformer):
    def name(self, token: Token) -> ast.Attr:
        text = str(token)
        if token.type == "BACKQUOTED":
            text = text[1:-1]
        return ast.Attr(name=text, position=token.column or 0)

    def string(self, token: Token) -> str:
        return _unquote(str(token))

    def number(self, token: Token) -> int | float:
        text = str(token)
        if any(c in text for c in ".eE"):
            return float(text)
        return int(text)

    def true(self, _token: Token) -> bool:
        return True

    def false(self, _token: Token) -> bool:
        return False

    def compare(self, attr: ast.Attr, op: Token, value: ast.Literal) -> ast.Compare:
        return ast.Compare(attr, _FLIP.get(str(op), str(op)), value)

    def in_(self, attr: ast.Attr, *rest: object) -> ast.In:
        negated = bool(rest) and isinstance(rest[0], Token) and rest[0].type == "NOT_KW"
        values = rest[1:] if negated else rest
        return ast.In(attr, tuple(values), negated)  # type: ignore[arg-type]  # lark's children are untyped; the grammar makes these literals

    def between(self, attr: ast.Attr, *rest: object) -> ast.Between:
        negated = len(rest) == 3
        low, high = rest[-2], rest[-1]
        return ast.Between(attr, low, high, negated)  # type: ignore[arg-type]  # as in_: literals by the grammar

    def starts_with(self, attr: ast.Attr, *rest: object) -> ast.StartsWith:
        negated = len(rest) == 2
        prefix = rest[-1]
        if not isinstance(prefix, str):
            raise QueryError(
                f"invalid query: STARTS_WITH needs a string at position {attr.position}, not {prefix!r}"
            )
        return ast.StartsWith(attr, prefix, negated)

    def is_null(self, attr: ast.Attr, *rest: object) -> ast.IsNull:
        return ast.IsNull(attr, negated=bool(rest))

    def not_(self, item: ast.Node) -> ast.Node:
        return ast.Not(item)

    def and_expr(self, *items: ast.Node) -> ast.Node:
        return ast.And(tuple(items))

    def or_expr(self, *items: ast.Node) -> ast.Node:
        return ast.Or(tuple(items))

    def group_by(self, *names: ast.Attr) -> tuple[str, tuple[ast.Attr, ...]]:
        return ("group", names)

    def order_term(self, attr: ast.Attr, direction: Token | None = None) -> ast.OrderBy:
        return ast.OrderBy(attr, descending=direction is not None and str(direction).lower() == "desc")

    def order_by(self, *terms: ast.OrderBy) -> tuple[str, tuple[ast.OrderBy, ...]]:
        return ("order", terms)

    def limit(self, _kw: Token, _n: Token) -> tuple[str, None]:
        return ("limit", None)

    def start(self, *parts: object) -> ast.Query:
        where = None
        group: tuple[ast.Attr, ...] = ()
        order: tuple[ast.OrderBy, ...] = ()
        for part in parts:
            if part is None:
                continue
            if isinstance(part, tuple) and part and part[0] == "group":
                group = part[1]
            elif isinstance(part, tuple) and part and part[0] == "order":
                order = part[1]
            elif isinstance(part, tuple) and part and part[0] == "limit":
                raise QueryError("invalid query: operation is not supported: 'LIMIT' clause")
            else:
                where = part
        return ast.Query(where=where, group_by=group, order_by=order)  # type: ignore[arg-type]  # as in_: a node and OrderBy terms by the grammar


# Rule names the parser may name in "expected ..." (lark's terminal names, made readable).
_READABLE = {
    "RPAR": "')'",
    "LPAR": "'('",
    "COMMA": "','",
    "NAME": "a search attribute name",
    "BACKQUOTED": "a search attribute name",
    "STRING": "a value",
    "SIGNED_NUMBER": "a value",
    "COMP_OP": "an operator",
    "NOT_KW": "not",
    "$END": "the end of the query",
}


@functools.cache
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser="lalr", propagate_positions=False, maybe_placeholders=True)


def parse(text: str) -> ast.Query:
    """The AST of a filter; an empty or blank filter matches every run.

    Raises:
        QueryError: a syntax error, with its 1-based position and what was expected there.
    """
    if not text.strip():
        return ast.Query()
    try:
        tree = _parser().parse(text)
    except UnexpectedCharacters as e:
        raise QueryError(
            f"invalid query: malformed query: syntax error at position {e.column}: "
            f"unexpected character {text[e.pos_in_stream]!r}"  # type: ignore[index]  # lark sets it on this error
        ) from None
    except UnexpectedEOF:
        raise QueryError(
            f"invalid query: malformed query: syntax error at position {len(text) + 1}: unexpected end of query"
        ) from None
    except UnexpectedToken as e:
        expected = sorted({_READABLE.get(t, t.lstrip("_").lower()) for t in e.expected})
        if e.token.type == "$END":
            where = f"position {len(text) + 1}: unexpected end of query"
        else:
            where = f"position {e.column}: unexpected {str(e.token)!r}"
        raise QueryError(
            f"invalid query: malformed query: syntax error at {where}"
            + (f" (expected {', '.join(expected[:6])})" if expected else "")
        ) from None
    except UnexpectedInput as e:  # pragma: no cover - the three above cover lark's LALR errors
        raise QueryError(f"invalid query: malformed query: syntax error at position {e.column}") from None
    try:
        return _ToAst().transform(tree)
    except VisitError as e:
        if isinstance(e.orig_exc, QueryError):
            raise e.orig_exc from None
        raise
