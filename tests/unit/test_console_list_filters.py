"""The workflows list's time ranges compose into the list filter (before any ORDER BY), custom bounds are
checked, and picked columns keep the catalog's order with unknown ones dropped."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from frontend import list_filters as lf

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("params", "condition"),
    [
        ({}, ""),
        ({"range": "1h"}, 'StartTime >= "2026-12-03T11:00:00Z"'),
        ({"range": "7d", "time_field": "CloseTime"}, 'CloseTime >= "2026-11-26T12:00:00Z"'),
        (
            {"range": "custom", "from": "2026-01-01T00:00", "to": "2026-01-02T06:30"},
            'StartTime BETWEEN "2026-01-01T00:00:00Z" AND "2026-01-02T06:30:00Z"',
        ),
        ({"range": "custom", "to": "2026-01-02T06:30"}, 'StartTime <= "2026-01-02T06:30:00Z"'),
        ({"range": "custom"}, ""),
        ({"range": "forever", "time_field": "Robert'); DROP"}, ""),
    ],
)
def test_range_condition(params, condition):
    assert lf.range_condition(lf.time_range(params), now=NOW) == condition


@pytest.mark.parametrize(
    "params",
    [
        {"range": "custom", "from": "yesterday"},
        {"range": "custom", "from": "2026-01-02T00:00", "to": "2026-01-01T00:00"},
    ],
)
def test_bad_custom_ranges_are_refused(params):
    with pytest.raises(lf.RangeError):
        lf.range_condition(lf.time_range(params), now=NOW)


@pytest.mark.parametrize(
    ("query", "composed"),
    [
        ("", "C"),
        ('WorkflowType = "a"', '(WorkflowType = "a") AND C'),
        ('WorkflowType = "a" ORDER BY StartTime', '(WorkflowType = "a") AND C ORDER BY StartTime'),
        ("order by CloseTime desc", "C order by CloseTime desc"),
        ('WorkflowId = "x order by y"', '(WorkflowId = "x order by y") AND C'),
        ('a = "x" OR b = "y"', '(a = "x" OR b = "y") AND C'),
    ],
)
def test_compose_keeps_order_by_last(query, composed):
    assert lf.compose(query, "C") == composed


def test_compose_without_a_range_is_the_query():
    assert lf.compose('WorkflowType = "a"', "") == 'WorkflowType = "a"'


def test_columns_picked():
    picked = lf.columns_picked(["duration", "sa:Region", "run_id", "sa:Gone", "bogus"], ["Region", "Tier"])
    assert picked == ["status", "workflow_id", "run_id", "duration", "sa:Region"]
    assert lf.column_label("sa:Region") == "Region"
    assert lf.column_label("close") == "End"


def test_range_params_round_trip():
    shown = lf.time_range({"range": "custom", "time_field": "CloseTime", "from": "2026-01-01T00:00"})
    assert shown.params() == {"range": "custom", "time_field": "CloseTime", "from": "2026-01-01T00:00"}
    assert lf.time_range(shown.params()) == shown
    assert lf.time_range({"range": "24h"}).params() == {"range": "24h", "time_field": "StartTime"}
