"""`/namespaces/<ns>/workflows/<workflow id>/<run id>/history`: a run's summary and its event history.

The summary is DescribeWorkflowExecution's answer plus the start and close events (input, result,
failure), decoded. A run that retention deleted after archiving it is shown from its archive, badged
"Archived", with export its only action. The history is read by pages of event ids, so only the batches that hold a page are
decrypted: a 10,000-event history costs one page per request. The compact view groups the whole history
(activities, timers, children, signals, updates) and pages the groups.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse

from engine.errors import FailedPrecondition, NotFound, Unavailable
from engine.services import console_reads
from frontend import history, present
from frontend.codec import connect_origin, encoded_payloads
from frontend.htmx import HtmxHttpRequest
from frontend.payloads import decode_all, message_json
from frontend.viewer import Viewer
from frontend.views.common import ArchiveUnreadable, base_context, console_page
from frontend.views.timeline import timeline_context

PAGE_SIZE = 100


def _int(raw: str | None, default: int = 0) -> int:
    try:
        return max(int(raw or default), 0)
    except ValueError:
        return default


def _failure(failure: Failure | None) -> dict | None:
    if failure is None:
        return None
    as_json = message_json(failure)
    return {
        "message": getattr(failure, "message", ""),
        "type": getattr(getattr(failure, "application_failure_info", None), "type", ""),
        "stack": getattr(failure, "stack_trace", ""),
        "raw": json.dumps(as_json, indent=2, ensure_ascii=False),
        "encoded": encoded_payloads(failure),
    }


def _outcome(closed: HistoryEvent | None) -> dict[str, object]:
    """The close event's result, failure or reason, decoded."""
    if closed is None:
        return {}
    name = closed.WhichOneof("attributes")
    assert name is not None  # a close event has its attributes
    attrs = getattr(closed, name)
    out: dict[str, object] = {"event": history.event_name(closed.event_type)}
    if attrs.DESCRIPTOR.fields_by_name.get("result") is not None and attrs.HasField("result"):
        out["result"] = decode_all(attrs.result)
    if attrs.DESCRIPTOR.fields_by_name.get("failure") is not None and attrs.HasField("failure"):
        out["failure"] = _failure(attrs.failure)
    if attrs.DESCRIPTOR.fields_by_name.get("details") is not None and attrs.HasField("details"):
        out["details"] = decode_all(attrs.details)
    reason = getattr(attrs, "reason", "")
    if reason:
        out["reason"] = reason
    new_run = getattr(attrs, "new_execution_run_id", "")
    if new_run:
        out["new_run_id"] = new_run
    return out


def _pending_activities(describe: DescribeWorkflowExecutionResponse) -> list[dict[str, object]]:
    shown = []
    for a in describe.pending_activities:
        shown.append(
            {
                "activity_id": a.activity_id,
                "type": a.activity_type.name,
                "state": present.pending_state(a.state),
                "attempt": a.attempt,
                "maximum_attempts": a.maximum_attempts,
                "last_started": present.when(a.last_started_time, a.HasField("last_started_time")),
                "last_heartbeat": present.when(a.last_heartbeat_time, a.HasField("last_heartbeat_time")),
                "next_retry": present.when(
                    a.next_attempt_schedule_time, a.HasField("next_attempt_schedule_time")
                ),
                "last_failure": _failure(a.last_failure) if a.HasField("last_failure") else None,
                "heartbeat": decode_all(a.heartbeat_details) if a.HasField("heartbeat_details") else [],
                "worker": a.last_worker_identity,
                "expires": present.when(a.expiration_time, a.HasField("expiration_time")),
            }
        )
    return shown


def _history_context(
    params: Mapping[str, str],
    run: console_reads.RunView,
    base: str,
    events: Sequence[HistoryEvent] | None = None,
) -> dict[str, object]:
    view = "compact" if params.get("view") == "compact" else "full"
    order = "asc" if params.get("order") == "asc" else "desc"
    last = run.execution.next_event_id - 1
    links: dict[str, str] = {}

    def href(**params: object) -> str:
        return (
            base
            + "?"
            + urlencode({"view": view, "order": order} | {k: v for k, v in params.items() if v is not None})
        )

    if view == "compact":
        groups = history.compact_groups(
            events
            if events is not None
            else run.archived_events
            if run.archived_events is not None
            else console_reads.run_all_events(run.execution)
        )
        page = _int(params.get("page"), 1) or 1
        pages = max((len(groups) + PAGE_SIZE - 1) // PAGE_SIZE, 1)
        page = min(page, pages)
        if order == "desc":
            groups.reverse()
        shown = [history.group_rows(g) for g in groups[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]]
        if page > 1:
            links["first"], links["prev"] = href(page=1), href(page=page - 1)
        if page < pages:
            links["next"], links["last"] = href(page=page + 1), href(page=pages)
        return {
            "view": view,
            "order": order,
            "groups": shown,
            "links": links,
            "event_count": last,
            "page_label": f"page {page} of {pages} ({len(groups)} groups)",
            "full_href": base + "?" + urlencode({"view": "full", "order": order}),
            "compact_href": base + "?" + urlencode({"view": "compact", "order": order}),
            "order_href": base
            + "?"
            + urlencode({"view": view, "order": "asc" if order == "desc" else "desc"}),
        }
    cursor = _int(params.get("after"))
    events = console_reads.run_page(
        run, after_event_id=cursor, page_size=PAGE_SIZE, descending=order == "desc"
    )
    rows = [history.event_row(e) for e in events]
    if rows:
        lowest, highest = min(r.event_id for r in rows), max(r.event_id for r in rows)
        if order == "desc":
            if highest < last:
                links["first"], links["prev"] = href(), href(after=min(highest + PAGE_SIZE + 1, last + 1))
            if lowest > 1:
                links["next"], links["last"] = href(after=lowest), href(after=min(PAGE_SIZE + 1, last + 1))
        else:
            if lowest > 1:
                links["first"], links["prev"] = href(), href(after=max(lowest - PAGE_SIZE - 1, 0))
            if highest < last:
                links["next"], links["last"] = href(after=highest), href(after=max(last - PAGE_SIZE, 0))
        label = f"events {lowest}–{highest} of {last}"
    else:
        label = f"no events after {cursor}" if cursor else "no events"
    return {
        "view": view,
        "order": order,
        "rows": rows,
        "links": links,
        "event_count": last,
        "page_label": label,
        "full_href": base + "?" + urlencode({"view": "full", "order": order}),
        "compact_href": base + "?" + urlencode({"view": "compact", "order": order}),
        "order_href": base + "?" + urlencode({"view": view, "order": "asc" if order == "desc" else "desc"}),
    }


def _run(ns_id: uuid.UUID, workflow_id: str, run_id: str) -> console_reads.RunView:
    try:
        return console_reads.run_view(namespace_id=ns_id, workflow_id=workflow_id, run_id=run_id)
    except NotFound:
        raise Http404("workflow run not found") from None
    except (Unavailable, FailedPrecondition) as e:  # archived, and its archive cannot be read now
        raise ArchiveUnreadable(str(e)) from None


def history_context(
    viewer: Viewer, *, namespace: str, workflow_id: str, run_id: str, params: Mapping[str, str]
) -> dict[str, object]:
    """The history part alone (htmx paging). Raises Http404 as the page does."""
    ns, _role = viewer.namespace(namespace)
    run = _run(ns.id, workflow_id, run_id)
    return _history_context(params, run, _base(namespace, workflow_id, run_id))


def _base(namespace: str, workflow_id: str, run_id: str) -> str:
    return reverse(
        "console-run", kwargs={"namespace": namespace, "workflow_id": workflow_id, "run_id": run_id}
    )


@console_page
def run_history(
    request: HtmxHttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    if request.htmx and request.htmx.target == "history" and not request.htmx.history_restore_request:
        # Paging and the view toggles swap the history alone; a full page otherwise (also when htmx
        # restores history on Back, which needs the whole page).
        h = history_context(
            viewer, namespace=namespace, workflow_id=workflow_id, run_id=run_id, params=request.GET
        )
        response = render(request, "frontend/_history.html", {"h": h})
    else:
        context = run_context(
            viewer, namespace=namespace, workflow_id=workflow_id, run_id=run_id, params=request.GET
        )
        response = render(request, "frontend/run.html", context)
        # The page's script posts payloads to the namespace's codec server: its CSP lets it connect
        # there, and only this namespace's run pages get that origin (frontend/middleware.py).
        origin = connect_origin(str(context["codec_url"]))
        if origin:
            response.csp_connect_src = origin  # type: ignore[attr-defined]
    patch_vary_headers(response, ["HX-Request", "HX-Target"])
    return response


def run_context(
    viewer: Viewer, *, namespace: str, workflow_id: str, run_id: str, params: Mapping[str, str]
) -> dict[str, object]:
    """Everything the run page shows, read now (the page, and its live updates). Raises Http404."""
    ns, _role = viewer.namespace(namespace)
    run = _run(ns.id, workflow_id, run_id)
    # The timeline and the compact view both need the whole history: it is read once for both.
    events = console_reads.run_whole_history(run)
    shown_history = _history_context(params, run, _base(namespace, workflow_id, run_id), events)
    info = run.describe.workflow_execution_info
    config = run.describe.execution_config
    start = present.when(info.start_time, info.HasField("start_time"))
    close = present.when(info.close_time, info.HasField("close_time"))
    started = run.started.workflow_execution_started_event_attributes if run.started is not None else None
    summary = {
        "workflow_id": info.execution.workflow_id,
        "run_id": info.execution.run_id,
        "type": info.type.name,
        "status": present.status_name(info.status),
        "task_queue": info.task_queue,
        "start": start,
        "close": close,
        "execution_time": present.when(info.execution_time, info.HasField("execution_time")),
        "duration": present.span((close - start) if close and start else None),
        "history_length": info.history_length,
        "history_size": info.history_size_bytes,
        "state_transitions": info.state_transition_count,
        "first_run_id": info.first_run_id if info.first_run_id != info.execution.run_id else "",
        "parent": info.parent_execution if info.HasField("parent_execution") else None,
        "root": info.root_execution
        if info.HasField("root_execution") and info.root_execution.run_id != info.execution.run_id
        else None,
        "run_timeout": present.duration(config.workflow_run_timeout),
        "execution_timeout": present.duration(config.workflow_execution_timeout),
        "task_timeout": present.duration(config.default_workflow_task_timeout),
        "identity": started.identity if started is not None else "",
        "attempt": started.attempt if started is not None else 0,
        "cron": started.cron_schedule if started is not None else "",
        "continued_from": started.continued_execution_run_id if started is not None else "",
        "latest_run_id": "",
    }
    if summary["execution_time"] == start:
        summary["execution_time"] = None  # shown only when the first task was delayed (cron, start delay)
    latest = console_reads.current_run_id(namespace_id=ns.id, workflow_id=workflow_id)
    if latest and latest != run_id:
        summary["latest_run_id"] = latest
    context = base_context(viewer, namespace) | {
        "summary": summary,
        "input": decode_all(started.input) if started is not None and started.HasField("input") else [],
        "outcome": _outcome(run.closed),
        "search_attributes": present.search_attributes(info.search_attributes),
        "memo": present.memo(info.memo),
        "pending_activities": _pending_activities(run.describe),
        "pending_children": list(run.describe.pending_children),
        "history": shown_history,
        "timeline": timeline_context(run, namespace=namespace, params=params, events=events),
        "live_version": run.execution.db_version,
        # Deleted by retention and read from its archive: nothing changes it, so no live updates and
        # no actions but export.
        "archived": run.archived,
        "codec_url": ns.codec_server_url,
    }
    return context
