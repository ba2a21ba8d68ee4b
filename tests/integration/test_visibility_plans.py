"""Postgres plans of custom-attribute filters: a slotted attribute is read through its slot's index.

A few thousand runs in one namespace where one Keyword value is rare: the planner knows (column
statistics) that `Kw = 'rare'` matches a handful, and reads the slot's partial index in the default
order instead of walking the default-order index and filtering (what the JSON containment compile
led it to at a million runs, guessing 1 % for any `@>`). A Datetime range is an index range scan.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest
from django.db import connection

from tests.integration.test_visibility_sql import BASE, CUSTOM, SLOTS, _blank, _isolated, _to_record, register
from visibility.backends.sql import backend as sql_backend
from visibility.backends.sql import records as sql_records
from visibility.query import divisions as divisions_query
from visibility.query.parser import parse
from visibility.query.resolve import resolve
from visibility.search_attributes import format_datetime, from_micros

pytestmark = pytest.mark.django_db

RUNS = 4000


@pytest.fixture
def namespace() -> Iterator[uuid.UUID]:
    ns = uuid.uuid4()
    with _isolated(connection):
        register(connection, ns, SLOTS)
        for i in range(RUNS):
            values = {
                **_blank(),
                "ExecutionStatus": 2 if i % 10 else 1,
                "StartTime": BASE + i * 1_000_000,
                "CloseTime": BASE + i * 1_000_000 + 5 if i % 10 else None,
            }
            custom = {"Kw": "rare" if i % 800 == 7 else f"common-{i % 3}", "When": BASE + i * 1000, "Num": i}
            sql_records.record_upsert_txn(replace(_to_record(ns, values), custom=custom), slots=SLOTS)
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {sql_records.TABLE}")
        yield ns


def _plans(ns: uuid.UUID, text: str, *, slotted: bool = True) -> tuple[str, str]:
    """EXPLAIN of the statements a first page (page size 100) and a count of `text` run."""
    statements: list[tuple[str, object]] = []

    def capture(execute, sql_text, params, many, context):
        statements.append((sql_text, params))
        return execute(sql_text, params, many, context)

    list_query = resolve(parse(text), CUSTOM, count=False, slots=SLOTS if slotted else None)
    count_query = resolve(parse(text), CUSTOM, count=True, slots=SLOTS if slotted else None)
    with connection.execute_wrapper(capture):
        page, _ = sql_backend.list_records(ns, list_query, page_size=100, page_token=b"")
        sql_backend.count_records(ns, count_query)
    assert page, text
    plans = []
    with connection.cursor() as cursor:
        for statement, params in statements:
            cursor.execute("EXPLAIN " + statement, params)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return plans[0], plans[1]


def test_a_rare_keyword_is_read_through_its_slot_index(namespace) -> None:
    listing, count = _plans(namespace, "Kw = 'rare'")
    assert "vis_slot_keyword01" in listing, listing
    assert "vis_by_order" not in listing, listing
    assert "Sort" not in listing, listing  # the index is in the default order: no sort
    assert "vis_slot_keyword01" in count, count
    # The JSON compile of the same filter cannot use it (what this change replaced).
    listing, _ = _plans(namespace, "Kw = 'rare'", slotted=False)
    assert "vis_slot_keyword01" not in listing, listing


def test_a_datetime_range_is_an_index_range_scan(namespace) -> None:
    since = format_datetime(from_micros(BASE + (RUNS - 20) * 1000))
    listing, count = _plans(namespace, f"When > '{since}'")
    assert "vis_slot_datetime01" in listing, listing
    assert "datetime01 >" in listing, listing  # an index condition, not a filter over every row
    assert "vis_slot_datetime01" in count, count


def test_keyword_prefix_and_int_range_use_their_slots(namespace) -> None:
    listing, _ = _plans(namespace, "Kw STARTS_WITH 'ra'")
    assert "vis_slot_keyword01" in listing, listing
    listing, count = _plans(namespace, f"Num >= {RUNS - 30}")
    assert "vis_slot_int01" in listing, listing
    assert "vis_slot_int01" in count, count


def test_the_status_chips_count_of_workflows_reads_only_its_partial_index(namespace) -> None:
    """Workflow filters leave standalone activities out by their workflow id's prefix; the count of the list's
    status chips must still be an index-only scan (visibility migration 0005), not a read of every row."""
    query = resolve(
        divisions_query.restrict(parse("GROUP BY ExecutionStatus"), activities=False),
        CUSTOM,
        count=True,
        slots=SLOTS,
    )
    statements: list[tuple[str, object]] = []

    def capture(execute, sql_text, params, many, context):
        statements.append((sql_text, params))
        return execute(sql_text, params, many, context)

    with connection.execute_wrapper(capture):
        total, groups = sql_backend.count_records(namespace, query)
    assert total == RUNS
    assert dict(groups) == {1: RUNS // 10, 2: RUNS - RUNS // 10}
    (statement, params), *_ = statements
    assert "LIKE" in statement, statement  # the division's condition is there to be matched
    with connection.cursor() as cursor:
        # A few thousand rows are cheaper to read whole; at a million they are not. What is checked is that the
        # index can serve the count alone, which needs the planner to prove that the count's condition implies
        # the index's. With only index-only scans allowed, no other index can: each lacks workflow_id.
        for scan in ("seqscan", "bitmapscan", "indexscan"):
            cursor.execute(f"SET LOCAL enable_{scan} = off")
        cursor.execute("EXPLAIN " + statement, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        for scan in ("seqscan", "bitmapscan", "indexscan"):
            cursor.execute(f"SET LOCAL enable_{scan} = on")
    assert "Index Only Scan using vis_workflow_status" in plan, plan
