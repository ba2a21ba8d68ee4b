"""Schedules listed and counted (ListSchedules, CountSchedules): Temporal's list filter is evaluated schedule
by schedule with visibility's reference evaluator, since a namespace holds few schedules."""

from __future__ import annotations

from collections.abc import Mapping

from temporalio.api.common.v1 import SearchAttributes
from temporalio.api.schedule.v1 import ScheduleListEntry
from temporalio.api.workflowservice.v1 import ListSchedulesResponse

from engine import page_tokens
from engine.errors import InvalidArgument
from engine.models import Schedule as ScheduleRow
from engine.schedules import rules
from engine.schedules.spec import clean
from engine.services.schedules import jitter_seed_of, memo_of, open_record
from tenants.models import Namespace
from visibility import registry as visibility_registry
from visibility import selectors as visibility_selectors
from visibility.query import ast, memory
from visibility.query.parser import QueryError
from visibility.search_attributes import SaType, stored_values


def schedule_list(
    *, namespace: Namespace, page_size: int, page_token: bytes, query: str
) -> ListSchedulesResponse:
    """Schedules in id order, a page at a time (the token is the last id of the previous page).

    A query is Temporal's list filter over the schedules' search attributes and TemporalSchedulePaused,
    evaluated here with visibility's reference evaluator: a namespace holds few schedules, so they are
    filtered as they are read rather than indexed.

    Raises InvalidArgument for a malformed query or page token.
    """
    resolved = _filter(namespace, query)
    page_size = page_size if 0 < page_size <= 1000 else 1000
    rows = ScheduleRow.objects.filter(namespace=namespace).order_by("schedule_id")
    if page_token:
        rows = rows.filter(schedule_id__gt=page_tokens.schedules_decode(page_token))
    custom = visibility_registry.custom_types(namespace.id) if resolved is not None else {}
    page: list[tuple[ScheduleRow, rules.ScheduleRecord]] = []
    more = False
    for row in rows.iterator():
        record = open_record(row)
        if resolved is not None and not memory.matches(resolved, _filter_values(row, record, custom)):
            continue
        if len(page) == page_size:
            more = True
            break
        page.append((row, record))
    entries = []
    for row, record in page:
        info = rules.list_info(record, rules.compiled(record), jitter_seed_of(row))
        clean(info.spec)
        entries.append(
            ScheduleListEntry(
                schedule_id=row.schedule_id,
                memo=memo_of(row),
                search_attributes=SearchAttributes.FromString(row.search_attributes)
                if row.search_attributes
                else None,
                info=info,
            )
        )
    token = page_tokens.schedules_encode(page[-1][0].schedule_id) if more and page else b""
    return ListSchedulesResponse(schedules=entries, next_page_token=token)


def schedule_count(*, namespace: Namespace, query: str) -> int:
    """How many of the namespace's schedules match a list filter, filtered as ListSchedules filters them.

    The real server takes the same filters here as in ListSchedules, so it never answers with groups:
    the one attribute GROUP BY takes (ExecutionStatus) is refused in a schedule filter.

    Raises InvalidArgument for a malformed query.
    """
    resolved = _filter(namespace, query)
    rows = ScheduleRow.objects.filter(namespace=namespace)
    if resolved is None:
        return rows.count()
    custom = visibility_registry.custom_types(namespace.id)
    return sum(
        1
        for row in rows.iterator()
        if memory.matches(resolved, _filter_values(row, open_record(row), custom))
    )


def _filter(namespace: Namespace, query: str) -> ast.Query | None:
    """The resolved schedule filter, or None for no filter. Raises InvalidArgument."""
    if not query:
        return None
    try:
        return visibility_selectors.schedule_filter_parse(namespace_id=namespace.id, query=query)
    except QueryError as e:
        raise InvalidArgument(str(e)) from None


def _filter_values(
    row: ScheduleRow, record: rules.ScheduleRecord, custom: Mapping[str, SaType]
) -> dict[str, object]:
    """What a list filter sees of a schedule: its typed search attributes, its id and whether it is paused."""
    attrs = (
        SearchAttributes.FromString(row.search_attributes) if row.search_attributes else SearchAttributes()
    )
    values = stored_values(attrs, custom)
    values["ScheduleId"] = row.schedule_id
    values["TemporalSchedulePaused"] = record.schedule.state.paused
    return values
