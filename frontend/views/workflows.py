"""`/namespaces/<ns>/workflows?query=`: the runs of a namespace, filtered by Temporal's list-filter language.

Paging uses the visibility backend's keyset token (the default order: open runs first, then by close and
start time), so a page does not shift when runs start or close meanwhile; the token travels base64url in
`?next=`. A bad filter shows the parser's message with a caret under the position it names.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from engine import live
from engine.services import console_reads
from frontend import present
from frontend.viewer import Viewer
from frontend.views.common import base_context, console_page
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


def _counts(namespace_id: object, query: str) -> tuple[int | None, dict[str, int]]:
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


def list_context(viewer: Viewer, *, namespace: str, params: Mapping[str, str]) -> dict[str, object]:
    """Everything the list page shows, read now (the page, and its live updates). Raises Http404."""
    ns, _role = viewer.namespace(namespace)
    live_version = live.namespace_version(ns.id)  # before the rows: see engine/live.py
    query = params.get("query", "")
    raw_token = params.get("next", "")
    problem = None
    rows: list = []
    next_token = b""
    try:
        executions, next_token = console_reads.run_list_page(
            namespace_id=ns.id, query=query, page_size=PAGE_SIZE, page_token=_token(raw_token)
        )
    except QueryError as e:
        problem = _problem(query, e)
        executions = []
    for info in executions:
        start = present.when(info.start_time, info.HasField("start_time"))
        close = present.when(info.close_time, info.HasField("close_time"))
        rows.append(
            {
                "workflow_id": info.execution.workflow_id,
                "run_id": info.execution.run_id,
                "type": info.type.name,
                "status": present.status_name(info.status),
                "task_queue": info.task_queue,
                "start": start,
                "close": close,
                "duration": present.span(close - start) if close and start else "",
                "history_length": info.history_length,
            }
        )
    total, counts = _counts(ns.id, query) if problem is None else (None, {})
    chips = [
        {
            "status": status,
            "count": counts.get(status, 0),
            "href": "?" + urlencode({"query": _status_query(query, status)}),
            "active": query.strip() == f'ExecutionStatus = "{status}"',
        }
        for status in present.STATUSES
    ]
    context = base_context(viewer, namespace) | {
        "query": query,
        "live_version": live_version,
        "problem": problem,
        "rows": rows,
        "total": total,
        "chips": chips,
        "examples": EXAMPLES,
        "first_page": not raw_token,
        "first_href": "?" + urlencode({"query": query}) if query else "?",
        "next_href": "?"
        + urlencode({"query": query, "next": base64.urlsafe_b64encode(next_token).decode().rstrip("=")})
        if next_token
        else "",
    }
    return context
