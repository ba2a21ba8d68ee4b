"""Gather one run's export: its history, its audit entries, its search attributes and memo, its links;
then sign the lot (engine/exports/manifest.py) and record the export in the audit log.

Reads go through the engine's read paths (engine/persistence/store.py, which decrypts), as the gRPC
API's do: live and closed runs alike. Archived runs (issue 14) are not reachable here yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from google.protobuf import json_format
from perdura import clock
from temporalio.api.common.v1 import Memo, SearchAttributes
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.api.history.v1 import History

from engine.exports import links, manifest, signing
from engine.models import Execution
from engine.persistence import store
from tenants import audit
from tenants.models import AuditEvent, Namespace

CLOCK_MARGIN = timedelta(minutes=5)
"""How far before a run's start an entry naming it by run id is still looked for (replica clock skew)."""


@dataclass(frozen=True, slots=True)
class RunExport:
    """An export ready to write: the document and what the audit entry says of it."""

    document: dict[str, Any]
    workflow_id: str
    run_id: str
    events: int
    audit_entries: int


def _time(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def _run_entries(namespace: Namespace, execution: Execution) -> list[AuditEvent]:
    """The audit entries that target this run: those naming it by run id, and those naming only its
    workflow id while it was the workflow id's current run (from its start until the next run's).

    An audited gRPC call is recorded after it took effect, so a start's entry follows the run's start
    time, and a termination's its close: the window runs to the next run's start, not to the close.
    """
    workflow = f"workflow/{execution.workflow_id}"
    run = f"{workflow}/{execution.run_id}"
    next_start = (
        Execution.objects.filter(
            namespace_id=namespace.id,
            workflow_id=execution.workflow_id,
            start_time__gt=execution.start_time,
        )
        .order_by("start_time")
        .values_list("start_time", flat=True)
        .first()
    )
    by_workflow = Q(target=workflow) | Q(target__startswith=f"{workflow}/activity/")
    window = Q(time__gte=execution.start_time)
    if next_start is not None:
        window &= Q(time__lt=next_start)
    # No entry names a run before it exists: bounding the time lets the (namespace, time) index serve
    # the query. The margin covers the clocks of other API replicas, for entries naming the run by id.
    query = AuditEvent.objects.filter(
        namespace_id=namespace.id, time__gte=execution.start_time - CLOCK_MARGIN
    ).filter(Q(target=run) | Q(target__startswith=f"{run}/") | (by_workflow & window))
    return list(query.order_by("id"))


def _run_section(namespace: Namespace, execution: Execution) -> dict[str, Any]:
    state = store.decode_state(execution)
    memo = Memo.FromString(state.memo) if state.memo else Memo()
    attributes = (
        SearchAttributes.FromString(state.search_attributes)
        if state.search_attributes
        else SearchAttributes()
    )
    return {
        "namespace": namespace.name,
        "namespace_id": str(namespace.id),
        "workflow_id": execution.workflow_id,
        "run_id": execution.run_id,
        "workflow_type": execution.workflow_type,
        "task_queue": execution.task_queue,
        "status": WorkflowExecutionStatus.Name(WorkflowExecutionStatus.ValueType(execution.status)),
        "start_time": _time(execution.start_time),
        "close_time": _time(execution.close_time),
        "history_length": execution.next_event_id - 1,
        # The current values (after every upsert), in the proto3 JSON of the SDK's types.
        "search_attributes": json_format.MessageToDict(attributes),
        "memo": json_format.MessageToDict(memo),
    }


def build(*, namespace: Namespace, workflow_id: str, run_id: str = "") -> RunExport:
    """The signed export of a run (the current one when `run_id` is empty).

    Raises:
        engine.errors.NotFound: no such run in this namespace.
        signing.SigningKeyError: the installation has no signing key.
    """
    key = signing.signing_key()
    execution = store.find_execution(namespace.id, workflow_id, run_id, lock=False)
    # Everything up to the run's next event id as read now: a live run's export is its history so far.
    events = list(
        store.history_events(execution, first_event_id=1, last_event_id=execution.next_event_id - 1)
    )
    entries = [audit.as_dict(e) for e in _run_entries(namespace, execution)]
    # The file is itself a History in proto3 JSON (`events` at the top, as `temporal workflow show -o json`
    # prints it), with Perdura's sections beside it: the SDK's WorkflowHistory.from_json and the temporal
    # CLI ignore fields they do not know, so both load the export as it is.
    document: dict[str, Any] = {
        "events": json_format.MessageToDict(History(events=events)).get("events", []),
        "format": manifest.FORMAT,
        "run": _run_section(namespace, execution),
        "links": links.links(namespace=namespace.name, events=events),
        "audit": entries,
    }
    subject = {"namespace": namespace.name, "workflow_id": execution.workflow_id, "run_id": execution.run_id}
    document["manifest"] = manifest.sign(
        subject=subject, document=document, key=key, created_at=_time(clock.now()) or ""
    )
    return RunExport(
        document=document,
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        events=len(events),
        audit_entries=len(entries),
    )


def record(*, namespace: Namespace, export: RunExport) -> None:
    """The export's own audit entry (as the bound actor): it appears in the run's next exports."""
    signed = export.document["manifest"]
    audit.record(
        action="export.run",
        target=f"workflow/{export.workflow_id}/{export.run_id}",
        namespace=namespace,
        details={
            "events": export.events,
            "audit_entries": export.audit_entries,
            "head": signed["head"],
            "key": signed["key"]["fingerprint"],
        },
    )
