"""The list-filter language: parsing, resolving against a registry, errors, and the in-memory semantics."""

from __future__ import annotations

import pytest
from temporalio.api.common.v1 import Payload, SearchAttributes

from visibility.query import ast
from visibility.query.memory import evaluate, matches, text_match
from visibility.query.parser import QueryError, parse
from visibility.query.resolve import parse_duration, resolve
from visibility.search_attributes import (
    SaType,
    SearchAttributeError,
    parse_datetime,
    to_micros,
    validate,
)

CUSTOM = {
    "CustomKeywordField": SaType.Keyword,
    "CustomKeywordListField": SaType.KeywordList,
    "CustomTextField": SaType.Text,
    "CustomIntField": SaType.Int,
    "CustomDoubleField": SaType.Double,
    "CustomBoolField": SaType.Bool,
    "CustomDatetimeField": SaType.Datetime,
}


def resolved(text: str, *, count: bool = False) -> ast.Query:
    return resolve(parse(text), CUSTOM, count=count)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "WorkflowId = 'a'",
        "`WorkflowId` = 'a'",
        'WorkflowId = "a"',
        "WorkflowType IN ('a', 'b') AND NOT (ExecutionStatus = 'Running' OR ExecutionStatus = 3)",
        "HistoryLength BETWEEN 1 AND 5",
        "HistoryLength NOT BETWEEN 1 AND 5",
        "WorkflowId STARTS_WITH 'order-'",
        "CloseTime IS NULL and ParentWorkflowId is not null",
        "StartTime > '2026-01-01T00:00:00Z' AND StartTime <= '2026-02-01T00:00:00.123+02:00'",
        "ExecutionDuration > '1h30m'",
        "CustomBoolField = true AND CustomDoubleField >= -1.5e2",
        "CustomKeywordListField IN ('x', 'y') AND CustomKeywordListField != 'z'",
        "CustomTextField = 'hello world'",
        "WorkflowId != 'a' ORDER BY StartTime DESC, CustomIntField",
        "workflowid_is_not_a_keyword = 'x'".replace("workflowid_is_not_a_keyword", "CustomKeywordField"),
    ],
)
def test_accepted_filters(text: str) -> None:
    """Every form of Temporal's filter language parses and resolves."""
    resolved(text)


def test_group_by_only_in_counts() -> None:
    """GROUP BY ExecutionStatus is a count's clause; other attributes and lists refuse it."""
    query = resolved("TaskQueue = 'q' GROUP BY ExecutionStatus", count=True)
    assert [a.name for a in query.group_by] == ["ExecutionStatus"]
    with pytest.raises(
        QueryError, match="'GROUP BY' clause is not supported for search attribute WorkflowType"
    ):
        resolved("GROUP BY WorkflowType", count=True)
    with pytest.raises(QueryError, match="only supported in count"):
        resolved("GROUP BY ExecutionStatus")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("WorkflowId = 'x' OR 1=1 --", "syntax error at position 21"),
        ("(WorkflowId = 'x'", "syntax error at position 18: unexpected end of query"),
        ("WorkflowId = 'x'; DROP TABLE engine_execution", "position 17"),
        ("WorkflowId =", "position 13"),
        ("WorkflowId", "unexpected end of query"),
        ("Foo = 'x'", "invalid search attribute: Foo"),
        ("workflowid = 'x'", "invalid search attribute: workflowid"),
        (
            "WorkflowId = 5",
            "invalid value type for search attribute WorkflowId of type Keyword: 5 (type: int64)",
        ),
        ("HistoryLength = '5'", 'of type Int: "5" (type: string)'),
        ("StartTime > '2020-01-01'", "unable to parse datetime '2020-01-01'"),
        ("ExecutionStatus = 'Bogus'", "invalid ExecutionStatus value 'Bogus'"),
        ("CustomTextField STARTS_WITH 'a'", "operator 'STARTS_WITH' not supported for Text"),
        ("CustomKeywordListField > 'a'", "operator '>' not supported for KeywordList"),
        ("CustomBoolField = 'true'", "of type Bool"),
        ("WorkflowId = 'a' LIMIT 5", "'LIMIT' clause"),
        ("ExecutionDuration > 'soon'", "neither a duration nor hh:mm:ss"),
        ("WorkflowId = 'x' ORDER BY CustomKeywordListField", "cannot sort by KeywordList"),
        # Past int64 the database raised an overflow (INTERNAL): issue 10, validation at the edge.
        ("HistoryLength > 99999999999999999999999", "HistoryLength is out of the range of a 64-bit integer"),
        ("HistoryLength > -9223372036854775809", "out of the range of a 64-bit integer"),
        ("ExecutionDuration > '9999999999999h'", "ExecutionDuration is out of the range of a 64-bit integer"),
        ("HistoryLength BETWEEN 1 AND 9223372036854775808", "out of the range of a 64-bit integer"),
        ("HistoryLength IN (1, 9223372036854775808)", "out of the range of a 64-bit integer"),
    ],
)
def test_rejected_filters(text: str, message: str) -> None:
    """Bad filters are refused with the position or the attribute and the problem."""
    with pytest.raises(QueryError, match=None) as caught:
        resolved(text)
    assert message in str(caught.value)


def test_values_come_out_typed() -> None:
    """Literals are converted to the record's stored form: statuses to numbers, times to microseconds."""
    query = resolved("ExecutionStatus = 'Completed' AND StartTime < '2026-01-01T00:00:00Z'")
    assert isinstance(query.where, ast.And)
    status, start = query.where.items
    assert isinstance(status, ast.Compare)
    assert isinstance(start, ast.Compare)
    assert status.value == 2
    assert start.value == to_micros(parse_datetime("2026-01-01T00:00:00Z"))
    assert start.attr.column == "start_time"


def test_string_escapes() -> None:
    """Quotes inside strings are doubled or backslash-escaped; the value is the literal text."""
    for text in ("WorkflowId = 'it''s'", "WorkflowId = 'it\\'s'", 'WorkflowId = "it\'s"'):
        where = parse(text).where
        assert isinstance(where, ast.Compare)
        assert where.value == "it's"


def test_durations() -> None:
    assert parse_duration("1h30m") == 5400 * 10**9
    assert parse_duration("250ms") == 250 * 10**6
    assert parse_duration("01:00:05") == 3605 * 10**9
    with pytest.raises(ValueError):  # noqa: PT011
        parse_duration("1 hour")


def test_three_valued_logic() -> None:
    """A comparison on a missing attribute is unknown, and NOT keeps it unknown (as SQL does)."""
    eq = resolved("CustomKeywordField = 'a'").where
    assert eq is not None
    assert evaluate(eq, {}) is None
    assert evaluate(ast.Not(eq), {}) is None
    assert not matches(resolved("NOT CustomKeywordField = 'a'"), {})
    assert matches(resolved("CustomKeywordField IS NULL"), {})
    assert matches(resolved("CustomKeywordField = 'a' OR WorkflowId = 'w'"), {"WorkflowId": "w"})


def test_keyword_list_and_text_semantics() -> None:
    """KeywordList `=` means contains; Text `=` means every word of the query is among the value's."""
    record = {"CustomKeywordListField": ["a", "b"], "CustomTextField": "Hello, big World"}
    assert matches(resolved("CustomKeywordListField = 'a'"), record)
    assert matches(resolved("CustomKeywordListField NOT IN ('c', 'd')"), record)
    assert not matches(resolved("CustomKeywordListField != 'b'"), record)
    assert matches(resolved("CustomTextField = 'world hello'"), record)
    assert not matches(resolved("CustomTextField = 'hello there'"), record)
    assert not text_match("anything", "  ")


def payload(data: bytes, t: bytes | None = None) -> Payload:
    metadata = {"encoding": b"json/plain"}
    if t:
        metadata["type"] = t
    return Payload(metadata=metadata, data=data)


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("Unknown1", b'"x"', "Namespace default has no mapping defined for search attribute Unknown1"),
        ("CustomIntField", b'"x"', "invalid value for search attribute CustomIntField of type Int: x"),
        ("CustomIntField", b"1.5", "of type Int: 1.5"),
        ("CustomIntField", b"9223372036854775808", "of type Int: 9223372036854775808"),  # past int64
        ("CustomDoubleField", b"1" + b"0" * 400, "of type Double"),  # past the largest double
        ("CustomKeywordField", b"5", "of type Keyword: 5"),
        ("CustomDatetimeField", b'"notadate"', "of type Datetime: notadate"),
        ("CustomKeywordListField", b'"single"', "of type KeywordList: single"),
        ("CustomKeywordField", b'["a", "b"]', "of type Keyword: [a b]"),
        ("WorkflowId", b'"x"', "WorkflowId attribute can't be set in SearchAttributes"),
        ("CustomKeywordField", b'"' + b"x" * 3000 + b'"', "exceeds size limit"),
    ],
)
def test_search_attribute_validation(name: str, data: bytes, message: str) -> None:
    """Start and upsert values are checked against the registry, worded as Temporal words it."""
    attrs = SearchAttributes(indexed_fields={name: payload(data)})
    with pytest.raises(SearchAttributeError) as caught:
        validate(attrs, CUSTOM, namespace="default")
    assert message in str(caught.value)


def test_search_attribute_values_typed() -> None:
    """Valid values decode to their stored form; a one-element list is its element; null removes."""
    attrs = SearchAttributes(
        indexed_fields={
            "CustomKeywordField": payload(b'["k"]'),
            "CustomIntField": payload(b"7", b"Int"),
            "CustomDoubleField": payload(b"2"),
            "CustomDatetimeField": payload(b'"2026-01-02T03:04:05Z"'),
            "CustomKeywordListField": payload(b'["a","b"]'),
            "CustomBoolField": payload(b"null"),
            "TemporalChangeVersion": payload(b'["patch-1"]'),
        }
    )
    assert validate(attrs, CUSTOM, namespace="default") == {
        "CustomKeywordField": "k",
        "CustomIntField": 7,
        "CustomDoubleField": 2.0,
        "CustomDatetimeField": to_micros(parse_datetime("2026-01-02T03:04:05Z")),
        "CustomKeywordListField": ["a", "b"],
        "CustomBoolField": None,
        "TemporalChangeVersion": ["patch-1"],
    }
