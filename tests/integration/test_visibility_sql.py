"""The SQL visibility backend against the in-memory evaluation of the AST, on Postgres and on SQLite.

Random filters (rendered as text, parsed and resolved like a client's) over random records must select
exactly the records the plain evaluator selects, in the namespace asked about and nowhere else, with
the custom attributes compiled on their slot columns and on the JSON document alike.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import uuid
from collections.abc import Iterator

import pytest
from django.db import connection, transaction
from django.db.backends.sqlite3.base import DatabaseWrapper as SqliteWrapper
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from visibility.backends.base import Record
from visibility.backends.sql import backend as sql_backend
from visibility.backends.sql import records as sql_records
from visibility.models import CustomSearchAttribute, VisibilityRecord
from visibility.query import ast
from visibility.query.memory import matches
from visibility.query.parser import QueryError, parse
from visibility.query.resolve import resolve
from visibility.search_attributes import COLUMNS, STATUS_BY_VALUE, SaType, format_datetime, from_micros

pytestmark = pytest.mark.django_db

NAMESPACE = uuid.UUID("00000000-0000-0000-0000-00000000000a")
OTHER = uuid.UUID("00000000-0000-0000-0000-00000000000b")
CUSTOM = {
    "Kw": SaType.Keyword,
    "KwList": SaType.KeywordList,
    "Txt": SaType.Text,
    "Num": SaType.Int,
    "Dbl": SaType.Double,
    "Flag": SaType.Bool,
    "When": SaType.Datetime,
    "Odd Name": SaType.Keyword,
}
SLOTS = {
    "Kw": "keyword01",
    "Num": "int01",
    "Dbl": "double01",
    "Flag": "bool01",
    "When": "datetime01",
    "Odd Name": "keyword02",
}
"""Slots of NAMESPACE's attributes (Text and KeywordList have none: the JSON document only)."""
OTHER_SLOTS = {**SLOTS, "Kw": "keyword02", "Odd Name": "keyword01", "Num": "int03", "When": "datetime02"}
"""OTHER's: the same names in other slots, so a filter reading the wrong namespace's slot would show."""
BASE = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in microseconds
WORDS = ["a", "ab", "b", "o'k", "Ab", "ba"]
TEXT_WORDS = ["alpha", "beta", "Gamma", "delta"]

_ids = itertools.count(1)

words = st.sampled_from(WORDS)
times = st.integers(0, 5).map(lambda i: BASE + i * 1_000_000)
maybe = st.none

records = st.fixed_dictionaries(
    {
        "WorkflowId": words,
        "WorkflowType": st.sampled_from(["A", "B"]),
        "ExecutionStatus": st.sampled_from([1, 2, 3]),
        "StartTime": times,
        "CloseTime": st.none() | times,
        "HistoryLength": st.integers(0, 4),
        "ParentWorkflowId": st.none() | words,
        "Kw": st.none() | words,
        "KwList": st.none() | st.lists(words, min_size=1, max_size=3),
        "Txt": st.none() | st.lists(st.sampled_from(TEXT_WORDS), min_size=1, max_size=3).map(" ".join),
        "Num": st.none() | st.integers(-2, 2),
        "Dbl": st.none() | st.sampled_from([-1.5, 0.0, 2.25]),
        "Flag": st.none() | st.booleans(),
        "When": st.none() | times,
        "Odd Name": st.none() | words,
    }
)

# Attributes the filters may name, with how to draw a literal for each.
_KEYWORDS = ["WorkflowId", "Kw", "Odd Name", "ParentWorkflowId"]
_ORDERED = {
    "HistoryLength": st.integers(-1, 5),
    "Num": st.integers(-3, 3),
    "Dbl": st.sampled_from([-2, -1.5, 0, 1.0, 2.25]),
}
_TIMES = ["StartTime", "CloseTime", "When"]


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _name(name: str) -> str:
    return f"`{name}`" if " " in name or name == "Kw" else name


def _time_literal(micros: int) -> str:
    return _quote(format_datetime(from_micros(micros)))


def leaves() -> st.SearchStrategy[str]:
    keyword = st.builds(
        lambda n, op, v: f"{_name(n)} {op} {_quote(v)}",
        st.sampled_from(_KEYWORDS),
        st.sampled_from(["=", "!=", ">", "<=", "STARTS_WITH", "NOT STARTS_WITH"]),
        words | st.sampled_from(["", "A"]),
    )
    keyword_in = st.builds(
        lambda n, neg, vs: f"{_name(n)} {'NOT IN' if neg else 'IN'} ({', '.join(_quote(v) for v in vs)})",
        st.sampled_from([*_KEYWORDS, "KwList", "WorkflowType"]),
        st.booleans(),
        st.lists(words | st.sampled_from(["A", "B"]), min_size=1, max_size=3),
    )
    keyword_list = st.builds(lambda op, v: f"KwList {op} {_quote(v)}", st.sampled_from(["=", "!="]), words)
    ordered = st.sampled_from(sorted(_ORDERED)).flatmap(
        lambda n: st.builds(
            lambda op, v, w: f"{n} {op} {v} AND {w}" if "BETWEEN" in op else f"{n} {op} {v}",
            st.sampled_from(["=", "!=", ">", ">=", "<", "<=", "BETWEEN", "NOT BETWEEN"]),
            _ORDERED[n],
            _ORDERED[n],
        )
    )
    timed = st.builds(
        lambda n, op, a, b: (
            f"{n} {op} {_time_literal(a)} AND {_time_literal(b)}"
            if "BETWEEN" in op
            else f"{n} {op} {_time_literal(a)}"
        ),
        st.sampled_from(_TIMES),
        st.sampled_from(["=", "!=", ">", "<=", "BETWEEN", "NOT BETWEEN"]),
        times,
        times,
    )
    status = st.builds(
        lambda op, s: f"ExecutionStatus {op} {_quote(STATUS_BY_VALUE[s])}",
        st.sampled_from(["=", "!="]),
        st.sampled_from([1, 2, 3, 4]),
    )
    flag = st.builds(
        lambda op, v: f"Flag {op} {'true' if v else 'false'}", st.sampled_from(["=", "!="]), st.booleans()
    )
    text = st.builds(
        lambda op, ws: f"Txt {op} {_quote(' '.join(ws))}",
        st.sampled_from(["=", "!="]),
        st.lists(st.sampled_from([*TEXT_WORDS, "gamma"]), min_size=1, max_size=2),
    )
    null = st.builds(
        lambda n, neg: f"{_name(n)} IS {'NOT ' if neg else ''}NULL",
        st.sampled_from(["CloseTime", "ParentWorkflowId", *CUSTOM]),
        st.booleans(),
    )
    return st.one_of(keyword, keyword_in, keyword_list, ordered, timed, status, flag, text, null)


filters = st.recursive(
    leaves(),
    lambda children: st.one_of(
        st.builds(lambda a, b: f"({a}) AND ({b})", children, children),
        st.builds(lambda a, b: f"{a} OR {b}", children, children),
        st.builds(lambda a: f"NOT ({a})", children),
    ),
    max_leaves=6,
)


def _to_record(namespace: uuid.UUID, values: dict[str, object]) -> Record:
    custom = {name: values[name] for name in CUSTOM if values[name] is not None}
    close = values["CloseTime"]
    return Record(
        execution_id=next(_ids),
        namespace_id=namespace,
        workflow_id=str(values["WorkflowId"]),
        run_id=uuid.uuid4().hex,
        workflow_type=str(values["WorkflowType"]),
        task_queue="q",
        status=int(values["ExecutionStatus"]),  # type: ignore[call-overload]  # the row's values are objects; these columns hold ints
        start_time=int(values["StartTime"]),  # type: ignore[call-overload]  # as status
        execution_time=int(values["StartTime"]),  # type: ignore[call-overload]  # as status
        close_time=close,  # type: ignore[arg-type]  # an int or None, as the generated row has it
        execution_duration=None,
        history_length=int(values["HistoryLength"]),  # type: ignore[call-overload]  # as status
        history_size_bytes=0,
        state_transition_count=0,
        parent_workflow_id=values["ParentWorkflowId"],  # type: ignore[arg-type]  # a str or None, as the generated row has it
        parent_run_id=None,
        root_workflow_id="r",
        root_run_id="r",
        first_run_id="",
        memo=b"",
        search_attributes=b"",
        custom=custom,
    )


def register(conn, namespace: uuid.UUID, slots: dict[str, str]) -> None:
    """Register CUSTOM in `namespace` with these slots (rows the writers' slot check reads)."""
    ns = namespace if conn.features.has_native_uuid_field else namespace.hex
    with conn.cursor() as cursor:
        for name, t in CUSTOM.items():
            cursor.execute(
                "INSERT INTO visibility_customsearchattribute (namespace_id, name, type, slot) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [ns, name, int(t), slots.get(name)],
            )


def slots_of(namespace: uuid.UUID) -> dict[str, str]:
    return OTHER_SLOTS if namespace == OTHER else SLOTS


def _memory_view(record: Record) -> dict[str, object]:
    view: dict[str, object] = {name: getattr(record, c.column) for name, c in COLUMNS.items()}
    view.update(record.custom)
    return view


@pytest.fixture(scope="module")
def sqlite(django_db_blocker) -> Iterator[SqliteWrapper]:
    """A private in-memory SQLite database holding only the visibility table."""
    with django_db_blocker.unblock():
        yield from _sqlite()


def _sqlite() -> Iterator[SqliteWrapper]:
    wrapper = SqliteWrapper(
        {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": ":memory:",
            "OPTIONS": {},
            "TIME_ZONE": None,
            "CONN_MAX_AGE": 0,
            "CONN_HEALTH_CHECKS": False,
            "AUTOCOMMIT": True,
            "ATOMIC_REQUESTS": False,
            "USER": "",
            "PASSWORD": "",
            "HOST": "",
            "PORT": "",
            "TEST": {},
        },
        alias="visibility-sqlite",
    )
    wrapper.ensure_connection()
    wrapper.disable_constraint_checking()
    with wrapper.schema_editor(atomic=False) as editor:
        editor.create_model(CustomSearchAttribute)
        editor.create_model(VisibilityRecord)
    wrapper.disable_constraint_checking()  # the run and namespace tables are not here
    yield wrapper
    wrapper.close()


def _load(conn, rows: list[Record]) -> None:
    with conn.cursor() as cursor:
        cursor.execute(f"DELETE FROM {sql_records.TABLE}")
    register(conn, NAMESPACE, SLOTS)
    register(conn, OTHER, OTHER_SLOTS)
    for row in rows:
        sql_records.record_upsert_txn(row, conn, slots=slots_of(row.namespace_id))


def _all_pages(conn, query: ast.Query, page_size: int) -> list[int]:
    ids: list[int] = []
    token = b""
    while True:
        page, token = sql_backend.list_records(
            NAMESPACE, query, page_size=page_size, page_token=token, connection=conn
        )
        ids += [r.execution_id for r in page]
        if not token:
            return ids


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mine=st.lists(records, max_size=12),
    theirs=st.lists(records, max_size=3),
    text=filters,
    page_size=st.integers(1, 5),
)
def test_sql_matches_memory(sqlite, mine, theirs, text, page_size) -> None:
    """SQL on Postgres and SQLite selects exactly what the in-memory evaluation selects.

    Each filter is compiled twice over the same records: on the slot columns and on the JSON document
    (as for an attribute without a slot); both must give the evaluator's answer.
    """
    try:
        slotted = resolve(parse(text), CUSTOM, count=False, slots=SLOTS)
        unslotted = resolve(parse(text), CUSTOM, count=False)
    except QueryError as e:  # pragma: no cover - the strategies only draw valid filters
        raise AssertionError(f"{text}: {e}") from e
    rows = [_to_record(NAMESPACE, v) for v in mine] + [_to_record(OTHER, v) for v in theirs]
    expected = sorted(
        r.execution_id for r in rows if r.namespace_id == NAMESPACE and matches(slotted, _memory_view(r))
    )
    for conn in (connection, sqlite):
        with _isolated(conn):
            _load(conn, rows)
            for query, how in ((slotted, "slots"), (unslotted, "json")):
                listed = _all_pages(conn, query, page_size)
                assert sorted(listed) == expected, (conn.vendor, how, text)
                assert len(set(listed)) == len(listed), "a run appeared on two pages"
                count, _ = sql_backend.count_records(NAMESPACE, query, conn)
                assert count == len(expected), (conn.vendor, how, text)


def test_default_order_and_group_by(sqlite) -> None:
    """Open runs first, then by close time and start time, newest first; counts group by status."""
    rows = [
        _to_record(NAMESPACE, {**_blank(), "ExecutionStatus": 2, "StartTime": BASE, "CloseTime": BASE + 5}),
        _to_record(NAMESPACE, {**_blank(), "ExecutionStatus": 1, "StartTime": BASE + 1}),
        _to_record(
            NAMESPACE, {**_blank(), "ExecutionStatus": 2, "StartTime": BASE + 2, "CloseTime": BASE + 9}
        ),
        _to_record(NAMESPACE, {**_blank(), "ExecutionStatus": 1, "StartTime": BASE + 3}),
    ]
    query = resolve(parse("GROUP BY ExecutionStatus"), CUSTOM, count=True)
    for conn in (connection, sqlite):
        with _isolated(conn):
            _load(conn, rows)
            listed = _all_pages(conn, resolve(parse(""), CUSTOM, count=False), 3)
            assert listed == [r.execution_id for r in (rows[3], rows[1], rows[2], rows[0])]
            assert sql_backend.count_records(NAMESPACE, query, conn) == (4, [(1, 2), (2, 2)])


def test_injection_is_a_literal(sqlite) -> None:
    """Quotes and SQL in a string literal are data: they match nothing and break nothing."""
    rows = [_to_record(NAMESPACE, _blank())]
    hostile = "x' OR 1=1 --"
    text = f"WorkflowId = {_quote(hostile)} OR `Odd Name` = {json.dumps(hostile)} OR Kw > {_quote(hostile)}"
    for slots in (SLOTS, {}):
        query = resolve(parse(text), CUSTOM, count=False, slots=slots)
        for conn in (connection, sqlite):
            with _isolated(conn):
                _load(conn, rows)
                assert _all_pages(conn, query, 10) == []
                assert sql_backend.count_records(NAMESPACE, query, conn)[0] == 0


def _blank() -> dict[str, object]:
    return {
        "WorkflowId": "w",
        "WorkflowType": "A",
        "ExecutionStatus": 1,
        "StartTime": BASE,
        "CloseTime": None,
        "HistoryLength": 1,
        "ParentWorkflowId": None,
        **dict.fromkeys(CUSTOM),
    }


@contextlib.contextmanager
def _isolated(conn) -> Iterator[None]:
    """Postgres rows written inside a savepoint rolled back at the end (their runs do not exist)."""
    if conn is not connection:
        yield
        return
    with transaction.atomic():
        yield
        transaction.set_rollback(True)
