"""`/namespaces/<ns>/create-schedule`, `/namespaces/<ns>/schedules/<id>/edit` and `.../delete`: a schedule
made, changed or deleted from the console (a cron or interval spec, workflow type and id, task queue,
JSON input, overlap policy).

The forms build the same CreateScheduleRequest and UpdateScheduleRequest the gRPC API takes and call the
same services (engine/services/schedules.py), so the spec is checked by the same rules with Temporal's
messages. Each needs what the gRPC table says CreateSchedule, UpdateSchedule or DeleteSchedule needs; each asks for a
reason and a ticked confirmation, and each outcome (done, refused, denied) is written to the audit log
under the RPC's name on `schedule/<id>` with the person, as the pause, trigger and backfill forms are.
An edit carries the schedule's conflict token from when the form was opened: a schedule changed since
is not overwritten (Temporal drops such an update silently; the console says so).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from temporalio.api.common.v1 import Payloads, WorkflowType
from temporalio.api.schedule.v1 import (
    IntervalSpec,
    Schedule,
    ScheduleAction,
    SchedulePolicies,
    ScheduleSpec,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflow.v1 import NewWorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import CreateScheduleRequest, UpdateScheduleRequest

from engine.api.methods import WORKFLOW_METHODS
from engine.errors import AlreadyExists, InvalidArgument, NotFound
from engine.services import schedules as schedule_service
from frontend.console_audit import context_for
from frontend.payloads import decode
from frontend.viewer import Viewer
from frontend.views.actions import FormError, json_payloads
from frontend.views.common import base_context, console_page
from frontend.views.schedules import OVERLAP_POLICIES, calendar_text, detail_context, schedule_detail
from tenants import audit, roles

MAX_REASON = 1000
FIELDS = (
    "schedule_id",
    "spec_kind",
    "cron",
    "interval",
    "workflow_type",
    "workflow_id",
    "task_queue",
    "input",
    "overlap",
    "reason",
    "confirm",
    "conflict_token",
)
_WHOLE = ("0-59", "0-23", "1-31", "1-12", "Sun-Sat")
"""Each cron field's whole range (minute, hour, day of month, month, day of week)."""
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


@dataclass
class ScheduleForm:
    """What the form shows and was sent: field values by name, and whether the input may be edited."""

    values: dict[str, str] = field(default_factory=dict)
    input_editable: bool = True
    """False when the schedule's input is not one JSON value (e.g. encoded by a client's codec): kept."""


def _interval(text: str) -> timedelta:
    found = _DURATION.fullmatch(text.strip().replace(" ", ""))
    if not text.strip() or found is None or not any(found.groups()):
        raise FormError(f"the interval {text!r} is not a duration such as 90s, 15m, 1h30m or 1d")
    days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    every = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if every < timedelta(seconds=1):
        raise FormError("the interval must be at least one second")
    return every


def _spec(values: dict[str, str], current: ScheduleSpec | None) -> tuple[ScheduleSpec, str]:
    """The spec the form asks for, and how the audit entry names it."""
    kind = values.get("spec_kind", "")
    if kind == "keep" and current is not None:
        return current, "kept"
    if kind == "cron":
        cron = values.get("cron", "").strip()
        if not cron:
            raise FormError("give a cron expression, e.g. 0 9 * * Mon-Fri")
        return ScheduleSpec(cron_string=[cron]), f"cron {cron}"
    if kind == "interval":
        every = _interval(values.get("interval", ""))
        spec = ScheduleSpec(interval=[IntervalSpec()])
        spec.interval[0].interval.FromTimedelta(every)
        return spec, f"every {values['interval'].strip()}"
    raise FormError("choose a cron expression or an interval")


def _overlap(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value not in dict(OVERLAP_POLICIES):
        raise FormError("choose an overlap policy")
    return value


def _schedule(
    values: dict[str, str], current: Schedule | None, input_editable: bool
) -> tuple[Schedule, dict]:
    """The schedule the form describes (an edit starts from the current one: its state and other policies
    stay), and the audit entry's details. Raises FormError."""
    reason = values.get("reason", "").strip()
    if not reason:
        raise FormError("say why (the reason is written to the audit log)")
    if len(reason) > MAX_REASON:
        raise FormError(f"the reason is longer than {MAX_REASON} characters")
    if values.get("confirm") != "yes":
        raise FormError("tick the confirmation to go ahead")
    schedule = Schedule()
    if current is not None:
        schedule.CopyFrom(current)
    spec, spec_text = _spec(values, current.spec if current is not None else None)
    if current is None or spec is not current.spec:
        schedule.spec.CopyFrom(spec)
    start = NewWorkflowExecutionInfo()
    if current is not None and current.action.HasField("start_workflow"):
        start.CopyFrom(current.action.start_workflow)
    start.workflow_type.CopyFrom(WorkflowType(name=values.get("workflow_type", "").strip()))
    start.task_queue.CopyFrom(TaskQueue(name=values.get("task_queue", "").strip()))
    start.workflow_id = values.get("workflow_id", "").strip() or values.get("schedule_id", "").strip()
    if input_editable:
        payloads = json_payloads(values.get("input", ""))
        if payloads is None:
            start.ClearField("input")
        else:
            start.input.CopyFrom(payloads)
    schedule.action.CopyFrom(ScheduleAction(start_workflow=start))
    if current is None:
        schedule.policies.CopyFrom(SchedulePolicies())
    schedule.policies.overlap_policy = _overlap(values.get("overlap", ""))  # type: ignore[assignment]
    details = {
        "spec": spec_text,
        "workflow_type": start.workflow_type.name,
        "workflow_id": start.workflow_id,
        "task_queue": start.task_queue.name,
        "overlap_policy": schedule.policies.overlap_policy,
        "reason": reason,
    }
    return schedule, details


def _input_text(payloads: Payloads) -> tuple[str, bool]:
    """The input as the form's JSON text, and whether the form may change it (one JSON value only)."""
    if not payloads.payloads:
        return "", True
    if len(payloads.payloads) > 1:
        return "", False
    shown = decode(payloads.payloads[0])
    return (shown.text, True) if shown.kind in ("json", "null") else ("", False)


def _cron_of(spec: ScheduleSpec) -> str:
    """A one-calendar spec as a five-field cron expression, when it runs on the minute ('' otherwise)."""
    if len(spec.structured_calendar) != 1 or spec.interval or spec.calendar or spec.cron_string:
        return ""
    fields = calendar_text(spec.structured_calendar[0]).split(" ")
    if len(fields) != 6 or fields[0] != "0":
        return ""
    # The canonical spec spells "every" as the field's whole range: written back as `*`.
    return " ".join("*" if f == whole else f for f, whole in zip(fields[1:], _WHOLE, strict=True))


def _may(role: str, method: str) -> bool:
    return roles.allows(role, WORKFLOW_METHODS[method].access)


def _page(
    request: HttpRequest,
    viewer: Viewer,
    namespace: str,
    form: ScheduleForm,
    *,
    schedule_id: str = "",
    problem: str = "",
    status: int = 200,
) -> HttpResponse:
    context = base_context(viewer, namespace) | {
        "form": form.values,
        "input_editable": form.input_editable,
        "editing": bool(schedule_id),
        "schedule_id": schedule_id,
        "overlap_policies": OVERLAP_POLICIES,
        "problem": problem,
    }
    return render(request, "frontend/schedule_form.html", context, status=status)


def _forbidden(request: HttpRequest, viewer: Viewer, namespace: str, schedule_id: str) -> HttpResponse:
    context = base_context(viewer, namespace) | {"schedule_id": schedule_id}
    return render(request, "frontend/schedule_forbidden.html", context, status=403)


def _detail(namespace: str, schedule_id: str, done: str) -> HttpResponseRedirect:
    url = reverse("console-schedule", kwargs={"namespace": namespace, "schedule_id": schedule_id})
    return HttpResponseRedirect(f"{url}?{urlencode({'done': done})}", status=303)


@require_http_methods(["GET", "POST"])
@console_page
def schedule_create(request: HttpRequest, viewer: Viewer, namespace: str) -> HttpResponse:
    ns, role = viewer.namespace(namespace)
    values = {k: request.POST.get(k, "") for k in FIELDS} if request.method == "POST" else {}
    schedule_id = values.get("schedule_id", "").strip()
    if not _may(role, "CreateSchedule"):
        if request.method == "POST":
            audit.record(
                action="CreateSchedule",
                target=f"schedule/{schedule_id}",
                namespace=ns,
                outcome=audit.DENIED,
                code="403",
                context=context_for(request, viewer),
            )
        return _forbidden(request, viewer, namespace, "")
    if request.method != "POST":
        defaults = {"spec_kind": "cron", "overlap": str(OVERLAP_POLICIES[0][0])}
        return _page(request, viewer, namespace, ScheduleForm(values=defaults))
    form = ScheduleForm(values=values)
    target = f"schedule/{schedule_id}"
    try:
        if not schedule_id:
            raise FormError("give the schedule an id")
        schedule, details = _schedule(values, None, True)
        schedule_service.schedule_create(
            namespace=ns,
            request=CreateScheduleRequest(
                namespace=ns.name,
                schedule_id=schedule_id,
                schedule=schedule,
                identity=f"console: {viewer.label}"[:255],
                request_id=str(uuid.uuid4()),
            ),
        )
    except (FormError, InvalidArgument, AlreadyExists) as e:
        audit.record(
            action="CreateSchedule",
            target=target,
            namespace=ns,
            outcome=audit.FAILED,
            code="ALREADY_EXISTS" if isinstance(e, AlreadyExists) else "INVALID_ARGUMENT",
            context=context_for(request, viewer),
        )
        return _page(request, viewer, namespace, form, problem=str(e), status=400)
    audit.record(
        action="CreateSchedule",
        target=target,
        namespace=ns,
        details=details,
        context=context_for(request, viewer),
    )
    return _detail(namespace, schedule_id, "created")


@require_http_methods(["GET", "POST"])
@console_page
def schedule_edit(request: HttpRequest, viewer: Viewer, namespace: str, schedule_id: str) -> HttpResponse:
    ns, role = viewer.namespace(namespace)
    target = f"schedule/{schedule_id}"
    if not _may(role, "UpdateSchedule"):
        if request.method == "POST":
            audit.record(
                action="UpdateSchedule",
                target=target,
                namespace=ns,
                outcome=audit.DENIED,
                code="403",
                context=context_for(request, viewer),
            )
        return _forbidden(request, viewer, namespace, schedule_id)
    try:
        described = schedule_service.schedule_describe(namespace=ns, schedule_id=schedule_id)
    except NotFound:
        raise Http404("schedule not found") from None
    current = described.schedule
    start = current.action.start_workflow
    input_text, input_editable = _input_text(start.input)
    if request.method != "POST":
        cron = _cron_of(current.spec)
        interval = ""
        if len(current.spec.interval) == 1 and not current.spec.structured_calendar:
            interval = f"{int(current.spec.interval[0].interval.ToTimedelta().total_seconds())}s"
        values = {
            "spec_kind": "keep",
            "cron": cron,
            "interval": interval,
            "workflow_type": start.workflow_type.name,
            "workflow_id": start.workflow_id,
            "task_queue": start.task_queue.name,
            "input": input_text,
            "overlap": str(current.policies.overlap_policy or OVERLAP_POLICIES[0][0]),
            "conflict_token": described.conflict_token.hex(),
        }
        return _page(
            request, viewer, namespace, ScheduleForm(values, input_editable), schedule_id=schedule_id
        )
    values = {k: request.POST.get(k, "") for k in FIELDS} | {"schedule_id": schedule_id}
    form = ScheduleForm(values=values, input_editable=input_editable)
    try:
        token = bytes.fromhex(values["conflict_token"])
    except ValueError:
        token = b""
    try:
        if token != described.conflict_token:
            raise FormError(
                "the schedule changed since this form was opened: open it again to see the changes"
            )
        schedule, details = _schedule(values, current, input_editable)
        schedule_service.schedule_update(
            namespace=ns,
            request=UpdateScheduleRequest(
                namespace=ns.name,
                schedule_id=schedule_id,
                schedule=schedule,
                conflict_token=token,
                identity=f"console: {viewer.label}"[:255],
                request_id=str(uuid.uuid4()),
            ),
        )
        # The service drops an update whose token is stale (as Temporal does): a change that landed
        # between the check above and the update shows here as a token that did not move.
        after = schedule_service.schedule_describe(namespace=ns, schedule_id=schedule_id)
        if after.conflict_token == token:
            raise FormError("the schedule changed meanwhile: open the form again to see the changes")
    except (FormError, InvalidArgument) as e:
        audit.record(
            action="UpdateSchedule",
            target=target,
            namespace=ns,
            outcome=audit.FAILED,
            code="INVALID_ARGUMENT",
            context=context_for(request, viewer),
        )
        return _page(request, viewer, namespace, form, schedule_id=schedule_id, problem=str(e), status=400)
    except NotFound:
        raise Http404("schedule not found") from None
    audit.record(
        action="UpdateSchedule",
        target=target,
        namespace=ns,
        details=details | {"input": "set" if input_editable else "kept"},
        context=context_for(request, viewer),
    )
    return _detail(namespace, schedule_id, "updated")


@require_http_methods(["GET", "POST"])
@console_page
def schedule_delete(request: HttpRequest, viewer: Viewer, namespace: str, schedule_id: str) -> HttpResponse:
    if request.method != "POST":
        # `<id>/delete` is also the detail URL of a schedule whose id ends so.
        return schedule_detail.__wrapped__(request, viewer, namespace, f"{schedule_id}/delete")  # type: ignore[attr-defined]  # set by functools.wraps in console_page
    ns, role = viewer.namespace(namespace)
    target = f"schedule/{schedule_id}"
    context = context_for(request, viewer)
    if not _may(role, "DeleteSchedule"):
        audit.record(
            action="DeleteSchedule",
            target=target,
            namespace=ns,
            outcome=audit.DENIED,
            code="403",
            context=context,
        )
        return _forbidden(request, viewer, namespace, schedule_id)
    reason = request.POST.get("reason", "").strip()
    problem = ""
    if not reason:
        problem = "say why the schedule is deleted (the reason is written to the audit log)"
    elif len(reason) > MAX_REASON:
        problem = f"the reason is longer than {MAX_REASON} characters"
    elif request.POST.get("confirm") != "yes":
        problem = "tick the confirmation to delete the schedule"
    if problem:
        audit.record(
            action="DeleteSchedule",
            target=target,
            namespace=ns,
            outcome=audit.FAILED,
            code="INVALID_ARGUMENT",
            context=context,
        )
        page = detail_context(viewer, namespace, schedule_id) | {
            "problem": problem,
            "opened": "delete",
            "form": {"reason": reason},
        }
        return render(request, "frontend/schedule.html", page, status=400)
    try:
        schedule_service.schedule_delete(namespace=ns, schedule_id=schedule_id)
    except NotFound:
        raise Http404("schedule not found") from None
    audit.record(
        action="DeleteSchedule", target=target, namespace=ns, details={"reason": reason}, context=context
    )
    url = reverse("console-schedules", kwargs={"namespace": namespace})
    return HttpResponseRedirect(f"{url}?{urlencode({'done': 'deleted', 'deleted': schedule_id})}", status=303)
