"""`/namespaces/<ns>/schedules`: the namespace's schedules, one schedule's detail (spec, action, policies,
recent and upcoming actions, running workflows), and its actions: pause and unpause with a note, trigger
now, backfill a time range.

Reads and writes go through engine/services/schedules.py, as DescribeSchedule, ListSchedules and
PatchSchedule do. Actions need the operator role (Access.WRITE, the gRPC table's PatchSchedule): a reader
sees no buttons and a POST of theirs answers 403. Each action is a form (CSRF) opened from a button and
confirmed by its own submit button, and is written to the audit log as `PatchSchedule` on
`schedule/<id>` with the person, as a gRPC PatchSchedule is with its key.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.enums.v1 import ScheduleOverlapPolicy
from temporalio.api.schedule.v1 import (
    BackfillRequest,
    Range,
    ScheduleAction,
    ScheduleActionResult,
    SchedulePatch,
    ScheduleSpec,
    StructuredCalendarSpec,
    TriggerImmediatelyRequest,
)
from temporalio.api.workflowservice.v1 import PatchScheduleRequest

from engine.errors import InvalidArgument, NotFound
from engine.services import schedule_lists
from engine.services import schedules as schedule_service
from frontend import present
from frontend.console_audit import context_for
from frontend.payloads import decode_all
from frontend.viewer import Viewer
from frontend.views.common import base_context, console_page
from tenants import audit
from tenants.roles import Access, allows

PAGE_SIZE = 50
MAX_NOTE = 1000
MAX_BACKFILL = timedelta(days=3660)
"""A backfill longer than ten years is a typo."""

OVERLAP_POLICIES = [
    (
        value,
        ScheduleOverlapPolicy.Name(value).removeprefix("SCHEDULE_OVERLAP_POLICY_").replace("_", " ").title(),
    )
    for value in ScheduleOverlapPolicy.values()
    if value != ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_UNSPECIFIED
]
ACTIONS = {
    "pause": "paused",
    "unpause": "unpaused",
    "trigger": "triggered",
    "backfill": "backfilled",
    "created": "created",
    "updated": "updated",
}


# --- presenting ---------------------------------------------------------------------------------------

_CAL_FIELDS = ("second", "minute", "hour", "day_of_month", "month", "day_of_week")
_DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]


def _ranges(ranges: Iterable[Range], names: list[str] | None = None) -> str:
    parts = []
    for r in ranges:
        start = names[r.start % 7] if names else str(r.start)
        text = start
        if r.end > r.start:
            text += "-" + (names[r.end % 7] if names else str(r.end))
        if r.step > 1:
            text += f"/{r.step}"
        parts.append(text)
    return ",".join(parts) or "*"


def calendar_text(cal: StructuredCalendarSpec) -> str:
    """A calendar as cron-like fields: `second minute hour day-of-month month day-of-week`."""
    text = " ".join(
        _ranges(getattr(cal, name), _DAYS if name == "day_of_week" else None) for name in _CAL_FIELDS
    )
    if cal.year:
        text += f" year {_ranges(cal.year)}"
    return text


def spec_lines(spec: ScheduleSpec) -> list[tuple[str, str]]:
    """What a spec says, one (kind, text) a line: intervals, calendars, cron strings, exclusions, bounds."""
    lines: list[tuple[str, str]] = []
    for interval in spec.interval:
        text = "every " + present.duration(interval.interval)
        if interval.phase.seconds or interval.phase.nanos:
            text += f" (offset {present.duration(interval.phase)})"
        lines.append(("Interval", text))
    for cal in spec.structured_calendar:
        lines.append(("Calendar", calendar_text(cal) + (f"  # {cal.comment}" if cal.comment else "")))
    for cron in spec.cron_string:
        lines.append(("Cron", cron))
    for legacy in spec.calendar:
        lines.append(
            (
                "Calendar",
                f"{legacy.second or '0'} {legacy.minute or '0'} {legacy.hour or '0'} {legacy.day_of_month or '*'} {legacy.month or '*'} {legacy.day_of_week or '*'}",
            )
        )  # noqa: E501
    for cal in spec.exclude_structured_calendar:
        lines.append(("Except", calendar_text(cal)))
    if spec.HasField("start_time"):
        lines.append(("From", spec.start_time.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")))
    if spec.HasField("end_time"):
        lines.append(("Until", spec.end_time.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")))
    if spec.jitter.seconds or spec.jitter.nanos:
        lines.append(("Jitter", present.duration(spec.jitter)))
    lines.append(("Time zone", spec.timezone_name or "UTC"))
    return lines


def _recent(results: Iterable[ScheduleActionResult]) -> list[dict[str, object]]:
    shown: list[dict[str, object]] = []
    for r in reversed(list(results)):
        shown.append(
            {
                "scheduled": present.when(r.schedule_time, r.HasField("schedule_time")),
                "actual": present.when(r.actual_time, r.HasField("actual_time")),
                "workflow_id": r.start_workflow_result.workflow_id,
                "run_id": r.start_workflow_result.run_id,
                "status": present.status_name(r.start_workflow_status) if r.start_workflow_status else "",
            }
        )
    return shown


def _upcoming(times: Iterable[Timestamp]) -> list[datetime]:
    return [t.ToDatetime(tzinfo=UTC) for t in times]


def _action(action: ScheduleAction) -> dict[str, object]:
    if not action.HasField("start_workflow"):
        return {}
    start = action.start_workflow
    return {
        "workflow_type": start.workflow_type.name,
        "workflow_id": start.workflow_id,
        "task_queue": start.task_queue.name,
        "input": decode_all(start.input) if start.HasField("input") else [],
        "run_timeout": present.duration(start.workflow_run_timeout),
        "execution_timeout": present.duration(start.workflow_execution_timeout),
    }


def _overlap_name(value: int) -> str:
    return dict(OVERLAP_POLICIES).get(ScheduleOverlapPolicy.ValueType(value), "Skip")


# --- pages ----------------------------------------------------------------------------------------------


def _can_act(role: str) -> bool:
    return allows(role, Access.WRITE)


@console_page
def schedule_list(request: HttpRequest, viewer: Viewer, namespace: str) -> HttpResponse:
    ns, role = viewer.namespace(namespace)
    token = request.GET.get("after", "")
    try:
        answer = schedule_lists.schedule_list(
            namespace=ns, page_size=PAGE_SIZE, page_token=token.encode("latin-1") if token else b"", query=""
        )
    except (InvalidArgument, UnicodeEncodeError):
        answer = schedule_lists.schedule_list(namespace=ns, page_size=PAGE_SIZE, page_token=b"", query="")
    rows = []
    for entry in answer.schedules:
        info = entry.info
        rows.append(
            {
                "id": entry.schedule_id,
                "paused": info.paused,
                "notes": info.notes,
                "workflow_type": info.workflow_type.name,
                "spec": spec_lines(info.spec)[:-1] or [("", "no times (trigger or backfill only)")],
                "recent": _recent(info.recent_actions)[:3],
                "upcoming": _upcoming(info.future_action_times)[:3],
            }
        )
    context = base_context(viewer, namespace) | {
        "schedules": rows,
        "next_href": "?" + urlencode({"after": answer.next_page_token.decode("latin-1")})
        if answer.next_page_token
        else "",
        "can_act": _can_act(role),
        "deleted": request.GET.get("deleted", "") if request.GET.get("done") == "deleted" else "",
    }
    return render(request, "frontend/schedules.html", context)


def detail_context(viewer: Viewer, namespace: str, schedule_id: str) -> dict[str, object]:
    ns, role = viewer.namespace(namespace)
    try:
        described = schedule_service.schedule_describe(namespace=ns, schedule_id=schedule_id)
    except NotFound:
        raise Http404("schedule not found") from None
    schedule, info = described.schedule, described.info
    policies = schedule.policies
    return base_context(viewer, namespace) | {
        "schedule_id": schedule_id,
        "state": {
            "paused": schedule.state.paused,
            "notes": schedule.state.notes,
            "limited": schedule.state.limited_actions,
            "remaining": schedule.state.remaining_actions,
        },
        "spec": spec_lines(schedule.spec),
        "action": _action(schedule.action),
        "policies": {
            "overlap": _overlap_name(policies.overlap_policy),
            "overlap_value": policies.overlap_policy or ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_SKIP,
            "catchup_window": present.duration(policies.catchup_window),
            "pause_on_failure": policies.pause_on_failure,
        },
        "info": {
            "action_count": info.action_count,
            "missed_catchup_window": info.missed_catchup_window,
            "overlap_skipped": info.overlap_skipped,
            "buffer_dropped": info.buffer_dropped,
            "created": present.when(info.create_time, info.HasField("create_time")),
            "updated": present.when(info.update_time, info.HasField("update_time")),
            "invalid": info.invalid_schedule_error,
        },
        "recent": _recent(info.recent_actions),
        "upcoming": _upcoming(info.future_action_times),
        "running": [(w.workflow_id, w.run_id) for w in info.running_workflows],
        "memo": present.memo(described.memo),
        "search_attributes": present.search_attributes(described.search_attributes),
        "can_act": _can_act(role),
        "overlap_policies": OVERLAP_POLICIES,
        "done": "",
        "problem": "",
        "opened": "",
        "form": {},
    }


@console_page
def schedule_detail(request: HttpRequest, viewer: Viewer, namespace: str, schedule_id: str) -> HttpResponse:
    context = detail_context(viewer, namespace, schedule_id)
    done = request.GET.get("done", "")
    context["done"] = ACTIONS.get(done, "")
    return render(request, "frontend/schedule.html", context)


def _parse_time(text: str, label: str) -> datetime:
    """A `datetime-local` value (or ISO 8601), taken as UTC when it names no zone."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{label}: {text!r} is not a date and time") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _overlap(text: str) -> ScheduleOverlapPolicy.ValueType:
    try:
        value = int(text or 0)
    except ValueError:
        value = -1
    if value not in dict(OVERLAP_POLICIES) and value != 0:
        raise InvalidArgument(f"unknown overlap policy {text!r}")
    return ScheduleOverlapPolicy.ValueType(value)


def _patch(action: str, form: dict[str, str], viewer: Viewer) -> tuple[SchedulePatch, dict[str, object]]:
    """The patch a form asks for, and what the audit entry says of it. Raises InvalidArgument."""
    note = form.get("note", "").strip()
    if len(note) > MAX_NOTE:
        raise InvalidArgument(f"the note is longer than {MAX_NOTE} characters")
    if action == "pause":
        if not note:
            raise InvalidArgument("say why the schedule is paused (the note is shown with it)")
        return SchedulePatch(pause=note), {"patch": "pause"}
    if action == "unpause":
        return SchedulePatch(unpause=note or f"Unpaused in the console by {viewer.label}"), {
            "patch": "unpause"
        }
    if action == "trigger":
        overlap = _overlap(form.get("overlap", ""))
        return (
            SchedulePatch(trigger_immediately=TriggerImmediatelyRequest(overlap_policy=overlap)),
            {"patch": "trigger", "overlap_policy": overlap},
        )
    start = _parse_time(form.get("start", ""), "Start")
    end = _parse_time(form.get("end", ""), "End")
    if end <= start:
        raise InvalidArgument("the backfill's end must be after its start")
    if end - start > MAX_BACKFILL:
        raise InvalidArgument("a backfill covers ten years at most")
    overlap = _overlap(form.get("overlap", ""))
    request = BackfillRequest(overlap_policy=overlap)
    request.start_time.FromDatetime(start)
    request.end_time.FromDatetime(end)
    details = {
        "patch": "backfill",
        "start": start.isoformat(),
        "end": end.isoformat(),
        "overlap_policy": overlap,
    }
    return SchedulePatch(backfill_request=[request]), details


@require_http_methods(["GET", "POST"])
@console_page
def schedule_action(
    request: HttpRequest, viewer: Viewer, namespace: str, schedule_id: str, action: str
) -> HttpResponse:
    if request.method != "POST":
        # `<id>/pause` is also the detail URL of a schedule whose id ends so.
        return schedule_detail.__wrapped__(request, viewer, namespace, f"{schedule_id}/{action}")  # type: ignore[attr-defined]  # set by functools.wraps in console_page
    return _act(request, viewer, namespace, schedule_id, action)


def _act(request: HttpRequest, viewer: Viewer, namespace: str, schedule_id: str, action: str) -> HttpResponse:
    ns, role = viewer.namespace(namespace)
    target = f"schedule/{schedule_id}"
    context = context_for(request, viewer)
    if not _can_act(role):
        audit.record(
            action="PatchSchedule",
            target=target,
            namespace=ns,
            outcome=audit.DENIED,
            code="403",
            details={"patch": action},
            context=context,
        )
        response = render(
            request,
            "frontend/schedule_forbidden.html",
            base_context(viewer, namespace) | {"schedule_id": schedule_id},
            status=403,
        )
        return response
    form = {k: request.POST.get(k, "") for k in ("note", "overlap", "start", "end")}
    try:
        patch, details = _patch(action, form, viewer)
        schedule_service.schedule_patch(
            namespace=ns,
            request=PatchScheduleRequest(
                namespace=ns.name,
                schedule_id=schedule_id,
                patch=patch,
                identity=f"console: {viewer.label}"[:255],
                request_id=str(uuid.uuid4()),
            ),
        )
    except NotFound:
        raise Http404("schedule not found") from None
    except InvalidArgument as e:
        audit.record(
            action="PatchSchedule",
            target=target,
            namespace=ns,
            outcome=audit.FAILED,
            code="INVALID_ARGUMENT",
            details={"patch": action},
            context=context,
        )
        page = detail_context(viewer, namespace, schedule_id) | {
            "problem": str(e),
            "opened": action,
            "form": form,
        }
        return render(request, "frontend/schedule.html", page, status=400)
    audit.record(action="PatchSchedule", target=target, namespace=ns, details=details, context=context)
    url = reverse("console-schedule", kwargs={"namespace": namespace, "schedule_id": schedule_id})
    return HttpResponseRedirect(f"{url}?{urlencode({'done': action})}", status=303)
