"""Gather one run's export: its history, its audit entries, its search attributes and memo, its links;
then sign the lot (engine/exports/manifest.py) and record the export in the audit log.

Reads go through the engine's read paths (engine/persistence/store.py, which decrypts), as the gRPC
API's do: live and closed runs alike. A run that retention deleted after archiving it is exported from its
archive (engine/archival/history.py): the same document, its run section derived from the archived events
as DescribeWorkflowExecution derives it (engine/services/archived_runs.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q
from google.protobuf import json_format
from perdura import clock
from temporalio.api.common.v1 import Memo, SearchAttributes
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.api.history.v1 import History, HistoryEvent

from engine.archival import history as archival_history
from engine.archival import s3
from engine.errors import FailedPrecondition, NotFound, Unavailable
from engine.exports import links, manifest, signing
from engine.history import subjects
from engine.models import Execution
from engine.persistence import store, subject_seal
from engine.services import archived_runs
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
    subject = subjects.subject_of(state.search_attributes)
    if subject is not None:
        # As in the events: a data subject's memo stays sealed in the file (erased ones are markers).
        subject_seal.each_payload(memo, subject_seal.sealer(namespace.id, subject))
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


def _archived(
    namespace: Namespace, workflow_id: str, run_id: str
) -> tuple[Execution, list[HistoryEvent], dict[str, Any]] | None:
    """(a stand-in row, the events with a subject's payloads sealed, the run section) of a deleted run
    whose history was archived (the workflow id's newest archived run when `run_id` is empty); None
    when it has no archive.

    Raises:
        engine.errors.Unavailable: the store does not answer.
        engine.errors.FailedPrecondition: the archive is missing, does not open, or is not a closed
            run's whole history.
    """
    record = archival_history.find(namespace.id, workflow_id, run_id)
    if record is None:
        return None
    try:
        events = archival_history.read(record, keep_sealed=True)
        described = archived_runs.describe_archived(events, run_id=record.run_id)
    except s3.StoreError as e:
        raise Unavailable(f"the history archive cannot be read now: {e}") from None
    except (archival_history.ArchiveCheckFailed, archived_runs.NotAnArchivedRun) as e:
        raise FailedPrecondition(str(e)) from None
    info = described.workflow_execution_info
    # Never saved: the audit window and the document read the run's ids and times from it.
    execution = Execution(
        namespace_id=namespace.id,
        workflow_id=record.workflow_id,
        run_id=record.run_id,
        workflow_type=info.type.name,
        task_queue=info.task_queue,
        status=info.status,
        start_time=info.start_time.ToDatetime(tzinfo=UTC),
        close_time=info.close_time.ToDatetime(tzinfo=UTC),
        next_event_id=info.history_length + 1,
    )
    section = {
        "namespace": namespace.name,
        "namespace_id": str(namespace.id),
        "workflow_id": record.workflow_id,
        "run_id": record.run_id,
        "workflow_type": info.type.name,
        "task_queue": info.task_queue,
        "status": WorkflowExecutionStatus.Name(info.status),
        "start_time": _time(execution.start_time),
        "close_time": _time(execution.close_time),
        "history_length": info.history_length,
        # From the events, a data subject's memo still sealed in them, as the live export seals it.
        "search_attributes": json_format.MessageToDict(info.search_attributes),
        "memo": json_format.MessageToDict(info.memo),
        "archived": True,
    }
    return execution, events, section


def build(*, namespace: Namespace, workflow_id: str, run_id: str = "") -> RunExport:
    """The signed export of a run (the current one when `run_id` is empty), from its archive when
    retention deleted it after archiving it.

    Raises:
        engine.errors.NotFound: no such run in this namespace, nor in its archive.
        engine.errors.Unavailable: the run is archived and the store does not answer.
        engine.errors.FailedPrecondition: the run is archived and its archive cannot be read.
        signing.SigningKeyError: the installation has no signing key.
    """
    key = signing.signing_key()
    try:
        execution = store.find_execution(namespace.id, workflow_id, run_id, lock=False)
    except NotFound:
        archived = _archived(namespace, workflow_id, run_id)
        if archived is None:
            raise
        execution, events, run_section = archived
    else:
        # Everything up to the run's next event id as read now: a live run's export is its history so far.
        events = list(
            # A data subject's payloads stay sealed in the file: erasing the subject erases them here too.
            store.history_events(
                execution, first_event_id=1, last_event_id=execution.next_event_id - 1, keep_sealed=True
            )
        )
        run_section = _run_section(namespace, execution)
    entries = [audit.as_dict(e) for e in _run_entries(namespace, execution)]
    # The file is itself a History in proto3 JSON (`events` at the top, as `temporal workflow show -o json`
    # prints it), with Perdura's sections beside it: the SDK's WorkflowHistory.from_json and the temporal
    # CLI ignore fields they do not know, so both load the export as it is.
    document: dict[str, Any] = {
        "events": json_format.MessageToDict(History(events=events)).get("events", []),
        "format": manifest.FORMAT,
        "run": run_section,
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
