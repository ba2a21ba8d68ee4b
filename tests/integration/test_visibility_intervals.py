"""The visibility contract's per-interval count (`count_by_interval`, the console's charts of starts and
failures) on every backend of the conformance suite: SQLite, Postgres and OpenSearch (osmem-server
unless PERDURA_TEST_OPENSEARCH_URL names a cluster). Answers are checked against the records counted in
Python."""

from __future__ import annotations

import uuid

import pytest

from tests.integration import test_visibility_backends as suite
from tests.integration.test_visibility_sql import BASE
from visibility.backends.base import Record

pytestmark = pytest.mark.django_db

# The conformance suite's backends: SQLite, Postgres and OpenSearch.
harness, opensearch, sqlite_conn = suite.harness, suite.opensearch, suite.sqlite_conn
_dataset, _q = suite._dataset, suite._q


def _expected(
    rows: list[Record], field: str, start: int, step: int, buckets: int, keep=lambda r: True
) -> list[int]:  # type: ignore[no-untyped-def]
    counts = [0] * buckets
    for r in rows:
        value = r.start_time if field == "StartTime" else r.close_time
        if value is None or not keep(r):
            continue
        if start <= value < start + step * buckets:
            counts[(value - start) // step] += 1
    return counts


def test_count_by_interval_counts_each_interval(harness) -> None:  # type: ignore[no-untyped-def]
    """Each run counts in the interval its time falls in (start inclusive, end exclusive), only matching
    runs of the namespace count, open runs have no CloseTime, and times outside every interval count nowhere."""
    ns = uuid.uuid4()
    rows = _dataset(ns)
    with harness.session():
        harness.load(rows + _dataset(uuid.uuid4()))
        count = harness.backend.count_by_interval
        for field, start, step, buckets in [
            ("StartTime", BASE, 1_000_000, 5),
            ("StartTime", BASE - 2_000_000, 2_000_000, 3),
            ("StartTime", BASE + 1_000_000, 1_000_000, 2),
            ("CloseTime", BASE, 4_000_000, 6),
            ("CloseTime", BASE + 9_000_000, 1_000_000, 4),
        ]:
            got = count(ns, _q("", count=True), field=field, start=start, step=step, buckets=buckets)
            assert got == _expected(rows, field, start, step, buckets), (field, start, step, buckets)
        failed = count(
            ns,
            _q("ExecutionStatus = 'Failed'", count=True),
            field="CloseTime",
            start=BASE,
            step=5_000_000,
            buckets=5,
        )
        assert failed == _expected(rows, "CloseTime", BASE, 5_000_000, 5, keep=lambda r: r.status == 3)
        assert sum(failed) == 4
        assert count(ns, _q("", count=True), field="StartTime", start=BASE, step=1_000_000, buckets=5) == [
            3,
            3,
            2,
            2,
            2,
        ]


def test_count_by_interval_refuses_other_fields_and_sizes(harness) -> None:  # type: ignore[no-untyped-def]
    """Only StartTime and CloseTime, a step of at least 1 and 1 to 500 intervals."""
    ns = uuid.uuid4()
    with harness.session():
        for field, step, buckets in [
            ("HistoryLength", 1, 1),
            ("StartTime", 0, 1),
            ("StartTime", 1, 0),
            ("CloseTime", 1, 501),
        ]:
            with pytest.raises(ValueError, match="interval"):
                harness.backend.count_by_interval(
                    ns, _q("", count=True), field=field, start=BASE, step=step, buckets=buckets
                )
