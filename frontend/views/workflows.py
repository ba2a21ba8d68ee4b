"""`/namespaces/<ns>/workflows?query=`: the runs of a namespace, filtered by Temporal's list-filter language.

`?archived=1` lists the namespace's archive index instead (ListArchivedWorkflowExecutions' service: closed
runs whose visibility was archived, kept after retention deleted them), with the same filter language;
its runs carry an "archived" badge and open on their archived history.

Paging uses the visibility backend's keyset token (the default order: open runs first, then by close and
start time), so a page does not shift when runs start or close meanwhile; the token travels base64url in
`?next=`. A bad filter shows the parser's message with a caret under the position it names.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from perdura import clock
from temporalio.api.workflow.v1 import WorkflowExecutionInfo

from engine import live
from engine.api.methods import WORKFLOW_METHODS
from engine.services import console_reads
from frontend import list_filters, list_prefs, present
from frontend.viewer import Viewer
from frontend.views.common import base_context, console_page
from tenants import roles
from visibility import selectors
from visibility.query.parser import QueryError

PAGE_SIZE = 50
EXAMPLES = [
    'WorkflowType = "OrderWorkflow"',
    'ExecutionStatus = "Running"',
    'WorkflowId STARTS_WITH "order-"',
    'StartTime > "2026-01-01T00:00:00Z"',
    'ExecutionStatus = "Failed" AND TaskQueue = "payments"',
    'CloseTime BETWEEN "2026-01-01T00:00:00Z" AND "2026-02-01T00:00:00Z"',
]
_POSITION = re.compile(r"\bposition (\d+)\b")


@dataclass(frozen=True, slots=True)
class QueryProblem:
    message: str
    position: int | None
    """1-based column of the error in the query, when the parser names one."""
    before: str = ""
    at: str = ""
    after: str = ""


def _problem(query: str, error: QueryError) -> QueryProblem:
    message = str(error)
    found = _POSITION.search(message)
    if found is None:
        return QueryProblem(message=message, position=None)
    position = int(found.group(1))
    index = min(max(position - 1, 0), len(query))
    return QueryProblem(
        message=message,
        position=position,
        before=query[:index],
        at=query[index : index + 1] or " ",
        after=query[index + 1 :],
    )


def _token(raw: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)) if raw else b""
    except (binascii.Error, ValueError):
        raise QueryError("invalid page token") from None


def _status_query(query: str, status: str) -> str:
    condition = f'ExecutionStatus = "{status}"'
    if not query.strip() or "executionstatus" in query.lower():
        return condition
    return f"({query}) AND {condition}"


def _counts(namespace_id: uuid.UUID, query: str) -> tuple[int | None, dict[str, int]]:
    """The total and per-status counts of the filter's runs (None when the filter cannot be counted)."""
    lowered = query.lower()
    if "order by" in lowered or "group by" in lowered:
        return None, {}
    grouped = f"{query} GROUP BY ExecutionStatus" if query.strip() else "GROUP BY ExecutionStatus"
    try:
        total, groups = selectors.execution_count(namespace_id=namespace_id, query=grouped)
    except QueryError:
        return None, {}
    return total, {present.status_name(status): count for status, count in groups}


@console_page
def workflows(request: HttpRequest, viewer: Viewer, namespace: str) -> HttpResponse:
    context = list_context(viewer, namespace=namespace, params=request.GET)
    return render(request, "frontend/workflows.html", context, status=400 if context["problem"] else 200)


def _when(raw: str) -> datetime:
    """The `at` of a relative range's later pages (now when absent or malformed)."""
    try:
        moment = datetime.fromisoformat(raw) if raw else None
    except ValueError:
        moment = None
    return moment if moment is not None and moment.tzinfo is not None else clock.now()


def _cells(info: WorkflowExecutionInfo, columns: list[str]) -> list[tuple[str, object]]:
    """The row's cells, one (kind, value) per column: the template draws each kind its own way."""
    start = present.when(info.start_time, info.HasField("start_time"))
    close = present.when(info.close_time, info.HasField("close_time"))
    execution = present.when(info.execution_time, info.HasField("execution_time"))
    values: dict[str, tuple[str, object]] = {
        "status": ("status", present.status_name(info.status)),
        "workflow_id": ("link", info.execution.workflow_id),
        "run_id": ("mono", info.execution.run_id),
        "type": ("text", info.type.name),
        "task_queue": ("small", info.task_queue),
        "start": ("time", start),
        "close": ("time", close),
        "execution_time": ("time", execution),
        "duration": ("num", present.span(close - start) if close and start else ""),
        "history_length": ("num", info.history_length),
    }
    attributes = {name: _bare(text) for name, text in present.search_attributes(info.search_attributes)}
    return [
        values[c]
        if c in values
        else ("small", attributes.get(c.removeprefix(list_filters.CUSTOM_PREFIX), ""))
        for c in columns
    ]


def _bare(text: str) -> str:
    """A search attribute's value for a table cell: a JSON string without its quotes."""
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, str) else text
    return text


def list_context(viewer: Viewer, *, namespace: str, params: Mapping[str, str]) -> dict[str, object]:
    """Everything the list page shows, read now (the page, and its live updates). Raises Http404."""
    ns, role = viewer.namespace(namespace)
    live_version = live.namespace_version(ns.id)  # before the rows: see engine/live.py
    view = list_prefs.view_get(namespace=ns, viewer=viewer, view_id=params.get("view", ""))
    # A saved view gives the query and range the URL does not (refining a view keeps its columns).
    query = params.get("query", view.query if view is not None and "query" not in params else "")
    shown_range = list_filters.time_range(
        params if view is None or "range" in params else dict(view.time_range)
    )
    at = _when(params.get("at", ""))
    raw_token = params.get("next", "")
    archived = params.get("archived") == "1"
    list_page = console_reads.archived_list_page if archived else console_reads.run_list_page
    problem = None
    rows: list = []
    next_token = b""
    try:
        effective = list_filters.compose(query, list_filters.range_condition(shown_range, now=at))
    except list_filters.RangeError as e:
        problem, effective = QueryProblem(message=str(e), position=None), query
    custom = sorted(selectors.search_attributes_of(namespace_id=ns.id)[1])
    picked = view.columns if view is not None else list_prefs.columns_of(namespace=ns, viewer=viewer)
    columns = list_filters.columns_picked(picked or list_filters.DEFAULT_COLUMNS, custom)
    if problem is None:
        try:
            executions, next_token = list_page(
                namespace_id=ns.id, query=effective, page_size=PAGE_SIZE, page_token=_token(raw_token)
            )
        except QueryError as e:
            # The parser's position counts in the query the person typed when no range was added.
            problem = (
                _problem(query, e) if effective == query else QueryProblem(message=str(e), position=None)
            )
            executions = []
        for info in executions:
            rows.append(
                {
                    "workflow_id": info.execution.workflow_id,
                    "run_id": info.execution.run_id,
                    "cells": _cells(info, columns),
                    "archived": archived,
                }
            )
    # Counts are of the live runs: the archive index is listed, not counted (no status chips there).
    total, counts = _counts(ns.id, effective) if problem is None and not archived else (None, {})
    kept = (
        shown_range.params()
        | ({"view": str(view.id)} if view is not None else {})
        | ({"archived": "1"} if archived else {})
    )

    def href(**extra: str) -> str:
        # `query` stays even when empty: under a saved view, an empty query is the person's choice.
        return "?" + urlencode(
            {k: v for k, v in ({"query": query} | kept | extra).items() if v or k == "query"}
        )

    tab_params = {k: v for k, v in ({"query": query} | kept).items() if v and k != "archived"}
    chips = (
        []
        if archived
        else [
            {
                "status": status,
                "count": counts.get(status, 0),
                "href": href(query=_status_query(query, status)),
                "active": query.strip() == f'ExecutionStatus = "{status}"',
            }
            for status in present.STATUSES
        ]
    )
    # Later pages keep the first page's "now", so a relative range's bounds do not move under them.
    pinned = {"at": at.isoformat()} if shown_range.active and shown_range.key != "custom" else {}
    context = base_context(viewer, namespace) | {
        "query": query,
        "effective_query": effective if effective != query else "",
        "can_batch": not archived and roles.allows(role, WORKFLOW_METHODS["StartBatchOperation"].access),
        "archived": archived,
        "live_tab_href": "?" + urlencode(tab_params),
        "archived_tab_href": "?" + urlencode(tab_params | {"archived": "1"}),
        "live_version": live_version,
        "problem": problem,
        "rows": rows,
        "columns": [(c, list_filters.column_label(c)) for c in columns],
        "column_choices": [
            (c, label, c in columns, c in list_filters.ALWAYS) for c, label in list_filters.COLUMNS.items()
        ]
        + [
            (list_filters.CUSTOM_PREFIX + n, n, list_filters.CUSTOM_PREFIX + n in columns, False)
            for n in custom
        ],
        "time_range": shown_range,
        "ranges": list(list_filters.RANGES.items()),
        "time_fields": list(list_filters.TIME_FIELDS.items()),
        "view": view,
        "views": list_prefs.views_of(namespace=ns, viewer=viewer),
        "view_error": list_prefs.VIEW_ERRORS.get(params.get("view_error", ""), ""),
        "total": total,
        "chips": chips,
        "examples": EXAMPLES,
        "first_page": not raw_token,
        "first_href": href(),
        "all_href": href(query=""),
        "next_href": href(next=base64.urlsafe_b64encode(next_token).decode().rstrip("="), **pinned)
        if next_token
        else "",
    }
    return context
