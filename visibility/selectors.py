"""Reads of the visibility app: the attribute registry, and listing and counting runs by a filter."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from tenants.models import Namespace
from visibility import registry
from visibility.backends import backend
from visibility.backends.base import Record
from visibility.backends.sql import backend as sql_backend
from visibility.backends.sql import records
from visibility.query import ast
from visibility.query import divisions as divisions_query
from visibility.query.parser import QueryError, parse
from visibility.query.resolve import resolve
from visibility.search_attributes import SYSTEM, SaType

MAX_PAGE_SIZE = 1000


def search_attributes_of(*, namespace_id: uuid.UUID) -> tuple[dict[str, SaType], dict[str, SaType]]:
    """The system attributes and the namespace's custom ones, by name."""
    return dict(SYSTEM), dict(registry.custom_types(namespace_id))


def filter_parse(
    *, namespace_id: uuid.UUID, query: str, count: bool = False, activities: bool = False
) -> ast.Query:
    """The resolved AST of a filter in this namespace, over its workflow runs, or with `activities` over
    its standalone activities (visibility.divisions): each sees only its own runs.

    Raises:
        QueryError: the filter is malformed, names an unknown attribute or compares it wrongly.
    """
    parsed = parse(query)
    names = _names(parsed)
    if activities or (count and _status_count(parsed, names)) or _has_standalone_activities(namespace_id):
        parsed = divisions_query.restrict(parsed, activities=activities)
        names = _names(parsed)
    registered = registry.custom_attributes(namespace_id, names=names)
    return resolve(parsed, registered.types, count=count, slots=registered.slots)


def _names(parsed: ast.Query) -> set[str]:
    """The attributes a parsed filter names, in its condition and its order."""
    names = set()
    stack: list[ast.Node] = [parsed.where] if parsed.where is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, ast.And | ast.Or):
            stack.extend(node.items)
        elif isinstance(node, ast.Not):
            stack.append(node.item)
        else:
            names.add(node.attr.name)
    names.update(t.attr.name for t in parsed.order_by)
    return names


def _status_count(parsed: ast.Query, names: set[str]) -> bool:
    """A count over the status alone (the console's status chips, `ExecutionStatus = 'Running'`, or all
    runs): narrowed to workflow runs even in a namespace without standalone activities (where it changes
    nothing), since only with that condition may Postgres count in the narrow partial index on
    (namespace, status) of visibility migration 0005: 67 ms for a million runs, 207 ms in the wide one."""
    return names <= {"ExecutionStatus"} and all(a.name == "ExecutionStatus" for a in parsed.group_by)


def _has_standalone_activities(namespace_id: uuid.UUID) -> bool:
    """Whether workflow filters must leave standalone activities' host runs out: not before the namespace's
    first one, and that condition (on workflow_id) would cost the indexes that lack it their index-only
    counts. Read each time (one primary-key read): the first start may come from any process. A list that
    reads False just as the first activity starts may show its host run once."""
    return Namespace.objects.filter(pk=namespace_id, has_standalone_activities=True).exists()


# What a schedule filter may name beside the namespace's custom attributes: Temporal indexes schedules
# as runs of its scheduler, so every other system attribute would describe that hidden run, not the
# schedule, and the real server refuses them.
SCHEDULE_ATTRIBUTES: dict[str, SaType] = {"ScheduleId": SaType.Keyword, "TemporalSchedulePaused": SaType.Bool}


def schedule_filter_parse(*, namespace_id: uuid.UUID, query: str) -> ast.Query:
    """The resolved AST of a ListSchedules or CountSchedules filter in this namespace.

    Both RPCs take the same filters, as on the real server: GROUP BY parses (the only attribute it takes,
    ExecutionStatus, is a system attribute a schedule filter refuses), ORDER BY and LIMIT do not.

    Raises:
        QueryError: the filter is malformed, names an unknown attribute or compares it wrongly, or names
            a system attribute other than ScheduleId and TemporalSchedulePaused.
    """
    parsed = parse(query)
    names = []
    stack: list[ast.Node] = [parsed.where] if parsed.where is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, ast.And | ast.Or):
            stack.extend(reversed(node.items))
        elif isinstance(node, ast.Not):
            stack.append(node.item)
        else:
            names.append(node.attr.name)
    names.extend(a.name for a in parsed.group_by)
    registered = registry.custom_attributes(namespace_id, names=set(names))
    types = {**registered.types, "ScheduleId": SaType.Keyword}
    resolved = resolve(parsed, types, count=True, slots={})
    for name in names:
        if name in SYSTEM and name not in SCHEDULE_ATTRIBUTES:
            raise QueryError(f'invalid query filter for schedules: cannot filter on "{name}"')
    return resolved


def _page(
    namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes, *, scan: bool
) -> tuple[list[Record], bytes]:
    resolved = filter_parse(namespace_id=namespace_id, query=query)
    size = page_size if 0 < page_size <= MAX_PAGE_SIZE else MAX_PAGE_SIZE
    read = backend().scan_page if scan else backend().list_page
    try:
        return read(namespace_id, resolved, page_size=size, page_token=page_token)
    except ValueError as e:
        raise QueryError(f"invalid page token: {e}") from None


def execution_list(
    *, namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes
) -> tuple[list[Record], bytes]:
    """A page of the namespace's runs matching `query`, and the next page's token.

    Raises:
        QueryError: a bad filter or page token.
    """
    return _page(namespace_id, query, page_size, page_token, scan=False)


def execution_scan(
    *, namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes
) -> tuple[list[Record], bytes]:
    """A page of a scan: every matching run once over all pages, in no promised order.

    Raises:
        QueryError: a bad filter or page token.
    """
    return _page(namespace_id, query, page_size, page_token, scan=True)


def archived_execution_list(
    *, namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes
) -> tuple[list[Record], bytes]:
    """A page of the namespace's archive index (closed runs whose visibility was archived) matching
    `query`, and the next page's token. The archive index is SQL whatever the live backend.

    Raises:
        QueryError: a bad filter or page token.
    """
    resolved = filter_parse(namespace_id=namespace_id, query=query)
    size = page_size if 0 < page_size <= MAX_PAGE_SIZE else MAX_PAGE_SIZE
    try:
        return sql_backend.list_records(
            namespace_id, resolved, page_size=size, page_token=page_token, table=records.ARCHIVE_TABLE
        )
    except ValueError as e:
        raise QueryError(f"invalid page token: {e}") from None


def execution_count(*, namespace_id: uuid.UUID, query: str) -> tuple[int, list[tuple[int, int]]]:
    """How many of the namespace's runs match `query` (and per ExecutionStatus with GROUP BY).

    Raises:
        QueryError: a bad filter.
    """
    resolved = filter_parse(namespace_id=namespace_id, query=query, count=True)
    return backend().count(namespace_id, resolved)


def activity_list(
    *, namespace_id: uuid.UUID, query: str, page_size: int, page_token: bytes
) -> tuple[list[Record], bytes]:
    """A page of the namespace's standalone activities matching `query` (ActivityId and ActivityType name
    the activity; records keep the host run's ids: visibility.divisions), and the next page's token.

    Raises:
        QueryError: a bad filter or page token.
    """
    resolved = filter_parse(namespace_id=namespace_id, query=query, activities=True)
    size = page_size if 0 < page_size <= MAX_PAGE_SIZE else MAX_PAGE_SIZE
    try:
        return backend().list_page(namespace_id, resolved, page_size=size, page_token=page_token)
    except ValueError as e:
        raise QueryError(f"invalid page token: {e}") from None


def activity_count(*, namespace_id: uuid.UUID, query: str) -> tuple[int, list[tuple[int, int]]]:
    """How many of the namespace's standalone activities match `query` (per ExecutionStatus with GROUP BY).

    Raises:
        QueryError: a bad filter.
    """
    resolved = filter_parse(namespace_id=namespace_id, query=query, count=True, activities=True)
    return backend().count(namespace_id, resolved)


def execution_count_by_interval(
    *, namespace_id: uuid.UUID, query: str, field: str, start: datetime, step: timedelta, buckets: int
) -> list[int]:
    """How many of the namespace's runs matching `query` have the time `field` (StartTime or CloseTime)
    in each of `buckets` intervals of `step` from `start`.

    Raises:
        QueryError: a bad filter.
        ValueError: another field, or a step or count out of range.
    """
    resolved = filter_parse(namespace_id=namespace_id, query=query, count=True)
    return backend().count_by_interval(
        namespace_id,
        resolved,
        field=field,
        start=_micros(start),
        step=step // timedelta(microseconds=1),
        buckets=buckets,
    )


def _micros(when: datetime) -> int:
    return (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
