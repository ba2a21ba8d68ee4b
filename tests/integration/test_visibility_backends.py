"""One conformance suite for every visibility backend: SQL (SQLite and Postgres) and OpenSearch.

Each test loads records into a fresh namespace of the backend under test and asks through the common
interface (visibility.backends.base.VisibilityBackend); answers are checked against the in-memory
evaluation of the AST. On SQL the custom attributes are registered with slots (SLOTS: every scalar one),
so filters read the slot columns. OpenSearch is osmem-server unless PERDURA_TEST_OPENSEARCH_URL names
a cluster.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.test_visibility_sql import (
    BASE,
    CUSTOM,
    SLOTS,
    _blank,
    _isolated,
    _memory_view,
    _sqlite,
    _to_record,
    filters,
    records,
    register,
)
from tests.support import opensearch as support
from visibility import backends, selectors
from visibility.backends import base
from visibility.backends.base import Record
from visibility.backends.opensearch.backend import OpenSearchBackend, client_from_url
from visibility.backends.sql import backend as sql_backend
from visibility.backends.sql import records as sql_records
from visibility.query import ast
from visibility.query.memory import matches
from visibility.query.parser import QueryError, parse
from visibility.query.resolve import resolve
from visibility.search_attributes import PREDEFINED, SaType

pytestmark = pytest.mark.django_db
TYPES = {**PREDEFINED, **CUSTOM}
_versions = itertools.count(1)


class Harness:
    """A backend plus a way to load records into it."""

    def __init__(self, name: str, backend: base.VisibilityBackend, conn=None) -> None:
        self.name = name
        self.backend = backend
        self.conn = conn

    def load(self, rows: list[Record]) -> None:
        if isinstance(self.backend, OpenSearchBackend):
            from visibility.backends.opensearch.documents import document

            acks = self.backend.bulk_index(
                (str(r.execution_id), next(_versions), document(r, TYPES)) for r in rows
            )
            assert all(a.done for a in acks), [a.error for a in acks if not a.done]
            return
        for namespace in {r.namespace_id for r in rows}:
            register(self.conn or connection, namespace, SLOTS)
        for row in rows:
            sql_records.record_upsert_txn(row, self.conn, slots=SLOTS)

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        with _isolated(self.conn) if self.conn is connection else contextlib.nullcontext():
            yield

    def all_pages(
        self, namespace: uuid.UUID, query: ast.Query, page_size: int, scan: bool = False
    ) -> list[int]:
        ids: list[int] = []
        token = b""
        fetch = self.backend.scan_page if scan else self.backend.list_page
        while True:
            page, token = fetch(namespace, query, page_size=page_size, page_token=token)
            ids += [r.execution_id for r in page]
            if not token:
                return ids


@pytest.fixture(scope="module")
def opensearch(django_db_blocker) -> Iterator[OpenSearchBackend]:
    with support.opensearch_url() as url:
        name = support.index_name()
        backend = OpenSearchBackend(client_from_url(url), name, replicas=0)
        backend.ensure_index()
        yield backend
        support.drop_index(url, name)


@pytest.fixture(scope="module")
def sqlite_conn(django_db_blocker):
    with django_db_blocker.unblock():
        yield from _sqlite()


@pytest.fixture(params=["sqlite", "postgres", "opensearch"])
def harness(request) -> Harness:
    if request.param == "opensearch":
        return Harness("opensearch", request.getfixturevalue("opensearch"))
    conn = request.getfixturevalue("sqlite_conn") if request.param == "sqlite" else connection
    return Harness(request.param, sql_backend.SqlBackend(conn), conn)


def _q(text: str, count: bool = False) -> ast.Query:
    return resolve(parse(text), CUSTOM, count=count, slots=SLOTS)


def _rows(namespace: uuid.UUID, n: int, **changes: object) -> list[Record]:
    return [_to_record(namespace, {**_blank(), **changes}) for _ in range(n)]


def _dataset(namespace: uuid.UUID) -> list[Record]:
    rows = []
    for i in range(12):
        closed = i % 3 != 0
        values = {
            **_blank(),
            "WorkflowId": f"w-{i:02d}",
            "WorkflowType": "A" if i % 2 else "B",
            "ExecutionStatus": 2 if closed and i % 2 else (3 if closed else 1),
            "StartTime": BASE + (i % 5) * 1_000_000,
            "CloseTime": BASE + (20 - i) * 1_000_000 if closed else None,
            "HistoryLength": i,
            "Kw": ["a", "b", None][i % 3],
            "KwList": [["x", "y"], ["y"], None][i % 3],
            "Txt": ["Alpha beta", "gamma-delta", None, "beta_gamma"][i % 4],
            "Num": [None, 1, -2][i % 3],
            "Dbl": [0.5, None][i % 2],
            "Flag": [True, False, None][i % 3],
            "When": BASE + i if i % 4 else None,
            "Odd Name": "o.k" if i % 5 == 0 else None,
        }
        rows.append(_to_record(namespace, values))
    return rows


QUERIES = [
    "",
    "WorkflowType = 'A'",
    "ExecutionStatus = 'Running'",
    "ExecutionStatus != 'Running' AND HistoryLength >= 4",
    "WorkflowId STARTS_WITH 'w-0'",
    "WorkflowId NOT STARTS_WITH 'w-0'",
    "WorkflowId BETWEEN 'w-03' AND 'w-07'",
    "WorkflowId IN ('w-01', 'w-11', 'nope')",
    "Kw = 'a' OR Num = -2",
    "Kw != 'a'",
    "KwList = 'y'",
    "KwList != 'x'",
    "KwList IN ('x', 'z')",
    "Txt = 'GAMMA'",
    "Txt = 'beta gamma'",
    "Txt != 'beta'",
    "Num IS NULL",
    "Num IS NOT NULL AND Dbl > 0.1",
    "Flag = true",
    "Flag != true",
    "CloseTime IS NULL",
    "CloseTime > '2026-01-01T00:00:10Z'",
    "When < '2026-01-01T00:00:00.000009Z'",
    "`Odd Name` = 'o.k'",
    "Kw > 'a' OR Kw STARTS_WITH 'a'",
    "Kw NOT IN ('b') AND Num NOT IN (1)",
    "Num IN (1, -2) AND Dbl <= 0.5",
    "When BETWEEN '2026-01-01T00:00:00.000002Z' AND '2026-01-01T00:00:00.000009Z'",
    "When NOT BETWEEN '2026-01-01T00:00:00.000002Z' AND '2026-01-01T00:00:00.000009Z'",
    "Flag != false AND `Odd Name` IS NULL",
    "NOT (Kw = 'a' AND Flag = true)",
    "StartTime = '2026-01-01T00:00:02Z' OR NOT (HistoryLength NOT IN (1, 2))",
]


def test_filters_select_what_the_evaluator_selects(harness) -> None:
    """Every operator and type, listed in pages and counted, gives the in-memory evaluator's answer."""
    ns = uuid.uuid4()
    rows = _dataset(ns)
    with harness.session():
        harness.load(rows)
        for text in QUERIES:
            query = _q(text)
            expected = sorted(r.execution_id for r in rows if matches(query, _memory_view(r)))
            listed = harness.all_pages(ns, query, 5)
            assert sorted(listed) == expected, (harness.name, text)
            assert len(set(listed)) == len(listed), (harness.name, text)
            assert harness.backend.count(ns, _q(text, count=True))[0] == len(expected), (harness.name, text)


def test_default_order_pages_and_group_by(harness) -> None:
    """Open runs first, then newest close, start and row id; count groups by status, largest first."""
    ns = uuid.uuid4()
    rows = _dataset(ns)
    expected = [
        r.execution_id
        for r in sorted(
            rows,
            key=lambda r: (
                r.close_time if r.close_time is not None else sql_records.MAX_SORT,
                r.start_time,
                r.execution_id,
            ),
            reverse=True,
        )
    ]
    with harness.session():
        harness.load(rows)
        assert harness.all_pages(ns, _q(""), 5) == expected
        assert harness.all_pages(ns, _q(""), 100) == expected
        total, groups = harness.backend.count(ns, _q("GROUP BY ExecutionStatus", count=True))
        assert (total, groups) == (12, [(1, 4), (2, 4), (3, 4)])
        total, groups = harness.backend.count(
            ns, _q("WorkflowType = 'A' GROUP BY ExecutionStatus", count=True)
        )
        assert (total, groups) == (6, [(2, 4), (1, 2)])


def test_pages_stay_stable_while_runs_start_and_close(harness) -> None:
    """Runs that start or close between pages neither repeat a run already listed nor skip one that stayed."""
    ns = uuid.uuid4()
    closed = [
        _to_record(ns, {**_blank(), "ExecutionStatus": 2, "StartTime": BASE + i, "CloseTime": BASE + 100 + i})
        for i in range(6)
    ]
    running = _rows(ns, 3, StartTime=BASE + 50)
    with harness.session():
        harness.load(closed + running)
        page, token = harness.backend.list_page(ns, _q(""), page_size=4, page_token=b"")
        seen = [r.execution_id for r in page]
        # Meanwhile: a new run starts (it sorts before the token) and a listed open run closes.
        harness.load(_rows(ns, 1, StartTime=BASE + 999))
        harness.load([replace(running[0], status=2, close_time=BASE + 500)])
        while token:
            page, token = harness.backend.list_page(ns, _q(""), page_size=4, page_token=token)
            seen += [r.execution_id for r in page]
        assert len(seen) == len(set(seen))
        assert set(seen) >= {r.execution_id for r in closed + running[1:]}


def test_scan_returns_every_match_once(harness) -> None:
    ns = uuid.uuid4()
    rows = _dataset(ns)
    with harness.session():
        harness.load(rows)
        query = _q("ExecutionStatus != 'Failed'")
        expected = sorted(r.execution_id for r in rows if matches(query, _memory_view(r)))
        scanned = harness.all_pages(ns, query, 3, scan=True)
        assert sorted(scanned) == expected
        assert len(scanned) == len(set(scanned))


def test_order_by_sorts_missing_values_last(harness) -> None:
    ns = uuid.uuid4()
    rows = _dataset(ns)
    with harness.session():
        harness.load(rows)
        for text, key, desc in [
            ("ORDER BY Num", lambda r: r.custom.get("Num"), False),
            ("ORDER BY WorkflowId DESC", lambda r: r.workflow_id, True),
            ("ORDER BY Kw DESC", lambda r: r.custom.get("Kw"), True),
            ("Num IS NOT NULL ORDER BY When", lambda r: r.custom.get("When"), False),
            ("Kw IS NOT NULL ORDER BY HistoryLength DESC", lambda r: r.history_length, True),
        ]:
            query = _q(text)
            chosen = [r for r in rows if matches(query, _memory_view(r))]
            present = sorted(
                (r for r in chosen if key(r) is not None),
                key=lambda r: (key(r), r.execution_id if desc else -r.execution_id),
                reverse=desc,
            )
            absent = sorted((r for r in chosen if key(r) is None), key=lambda r: -r.execution_id)
            assert harness.all_pages(ns, query, 4) == [r.execution_id for r in present + absent], text


def test_namespaces_are_apart(harness) -> None:
    """The same runs in two namespaces: each sees only its own, whatever the filter."""
    mine, theirs = uuid.uuid4(), uuid.uuid4()
    with harness.session():
        harness.load(_dataset(mine) + _dataset(theirs) + _dataset(theirs))
        assert harness.backend.count(mine, _q("", count=True))[0] == 12
        assert harness.backend.count(theirs, _q("WorkflowId STARTS_WITH 'w'", count=True))[0] == 24
        assert len(harness.all_pages(mine, _q("Kw = 'a' OR Kw != 'a' OR Kw IS NULL"), 7)) == 12


def test_bad_page_tokens_and_queries(harness, monkeypatch) -> None:
    """A token the backend did not make is InvalidArgument (QueryError); so are bad filters, before any backend."""
    monkeypatch.setattr(backends, "_loaded", harness.backend)
    ns = uuid.uuid4()
    with harness.session():
        harness.load(_rows(ns, 3))
        for token in [b"not base64!", b"bm90IGpzb24=", b"eyJjIjoieCJ9", b"WzEsMl0="]:
            with pytest.raises(QueryError, match="invalid page token"):
                selectors.execution_list(namespace_id=ns, query="", page_size=2, page_token=token)
        for text, fragment in [
            ("(WorkflowId = 'a'", "invalid query"),
            ("Nope = 'x'", "Nope"),
            ("HistoryLength = 'ten'", "HistoryLength"),
            ("WorkflowId = 'x' OR 1=1 --", "invalid query"),
        ]:
            with pytest.raises(QueryError, match=fragment):
                selectors.execution_list(namespace_id=ns, query=text, page_size=2, page_token=b"")
            with pytest.raises(QueryError, match=fragment):
                selectors.execution_count(namespace_id=ns, query=text)
        page, _ = selectors.execution_list(
            namespace_id=ns, query='WorkflowId = "x\' OR 1=1 --"', page_size=10, page_token=b""
        )
        assert page == []


def test_listing_returns_the_whole_record(harness) -> None:
    """What a listing returns is the record as written: memo, attribute map, times, parent."""
    ns = uuid.uuid4()
    row = replace(
        _to_record(
            ns, {**_blank(), "Kw": "k.1", "KwList": ["a"], "Dbl": 2.0, "When": BASE + 7, "Odd Name": "z"}
        ),
        memo=b"\x00sealed\xff",
        search_attributes=b"\x0a\x01x",
        parent_workflow_id="p",
        parent_run_id="pr",
        close_time=BASE + 9,
        execution_duration=123,
    )
    with harness.session():
        harness.load([row])
        (got,), _ = harness.backend.list_page(ns, _q(""), page_size=5, page_token=b"")
        assert got == row


def test_external_versions_keep_the_newest(opensearch) -> None:
    """An older document arriving late is refused (409, counted as done) and the newer one stays."""
    from visibility.backends.opensearch.documents import document

    ns = uuid.uuid4()
    row = _to_record(ns, _blank())
    newer = replace(row, status=2, close_time=BASE + 5)
    acks = opensearch.bulk_index([(str(row.execution_id), 7, document(newer, TYPES))])
    assert acks[0].done
    acks = opensearch.bulk_index([(str(row.execution_id), 6, document(row, TYPES))])
    assert acks[0].done
    assert not acks[0].retry
    (got,), _ = opensearch.list_page(ns, _q(""), page_size=5, page_token=b"")
    assert got.status == 2
    opensearch.delete(str(row.execution_id), 8)
    opensearch.bulk_index([(str(row.execution_id), 7, document(newer, TYPES))])
    assert opensearch.count(ns, _q("", count=True))[0] == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mine=st.lists(records, max_size=10),
    theirs=st.lists(records, max_size=3),
    text=filters,
    page_size=st.integers(1, 4),
)
def test_sql_opensearch_and_memory_agree(opensearch, sqlite_conn, mine, theirs, text, page_size) -> None:
    """Random filters over random runs: SQL, OpenSearch and the in-memory evaluator give the same runs."""
    ns, other = uuid.uuid4(), uuid.uuid4()
    query = _q(text)
    rows = [_to_record(ns, v) for v in mine] + [_to_record(other, v) for v in theirs]
    expected = sorted(
        r.execution_id for r in rows if r.namespace_id == ns and matches(query, _memory_view(r))
    )
    for harness in (
        Harness("opensearch", opensearch),
        Harness("sqlite", sql_backend.SqlBackend(sqlite_conn), sqlite_conn),
    ):
        harness.load(rows)
        listed = harness.all_pages(ns, query, page_size)
        assert sorted(listed) == expected, (harness.name, text)
        assert len(set(listed)) == len(listed), (harness.name, text)
        assert harness.backend.count(ns, _q(text, count=True))[0] == len(expected), (harness.name, text)


def test_custom_types_of_one_name_differ_by_namespace(opensearch) -> None:
    """Two namespaces may give one attribute name different types: the index keeps them apart."""
    from visibility.backends.opensearch.documents import document

    a, b = uuid.uuid4(), uuid.uuid4()
    ra = replace(_to_record(a, _blank()), custom={"Shared": "text"})
    rb = replace(_to_record(b, _blank()), custom={"Shared": 5})
    acks = opensearch.bulk_index(
        [
            (str(ra.execution_id), 1, document(ra, {"Shared": SaType.Keyword})),
            (str(rb.execution_id), 1, document(rb, {"Shared": SaType.Int})),
        ]
    )
    assert all(x.done for x in acks)
    assert (
        opensearch.count(a, resolve(parse("Shared = 'text'"), {"Shared": SaType.Keyword}, count=True))[0] == 1
    )
    assert opensearch.count(b, resolve(parse("Shared > 4"), {"Shared": SaType.Int}, count=True))[0] == 1
