"""Schedules: create, describe, update, patch, delete, list, and the scheduler tick that takes due actions.

The rules are pure (engine.schedules); this module loads and locks a schedule row, applies them, does the
I/O they call for (start, cancel or terminate runs, read the status of runs it started) and persists the
sealed record with its next wake-up in the same transaction. The shard that owns a schedule's row wakes
it when `next_wakeup_at` passes (engine.shards.schedules), under the shard's fence (DESIGN.md rules 3, 4).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Literal

from django.conf import settings
from django.db import IntegrityError, transaction
from google.protobuf.timestamp_pb2 import Timestamp
from perdura import clock
from temporalio.api.common.v1 import Memo, Payloads, SearchAttributes
from temporalio.api.enums.v1 import TaskQueueKind, WorkflowIdReusePolicy
from temporalio.api.errordetails.v1 import WorkflowExecutionAlreadyStartedFailure
from temporalio.api.failure.v1 import Failure
from temporalio.api.schedule.v1 import Schedule, ScheduleInfo
from temporalio.api.workflowservice.v1 import (
    CreateScheduleRequest,
    DescribeScheduleResponse,
    ListScheduleMatchingTimesRequest,
    PatchScheduleRequest,
    StartWorkflowExecutionRequest,
    UpdateScheduleRequest,
)

from engine import ids, validation
from engine.errors import AlreadyExists, EngineError, InvalidArgument, NotFound
from engine.history import retry
from engine.history.state import OPEN_STATUSES
from engine.models import CurrentRun, Execution
from engine.models import Schedule as ScheduleRow
from engine.persistence import encryption, store, wakeups
from engine.schedules import rules
from engine.schedules.calendar import SpecError
from engine.schedules.spec import CompiledSpec, clean, compile_spec
from engine.services import workflows
from tenants.models import Namespace

log = logging.getLogger(__name__)
_SCHEDULER_PREFIX = "temporal-sys-scheduler:"
_TIMESTAMP_SUFFIX = "-2009-11-10T23:00:00Z"
_MAX_NOTES = 1000
_MAX_BUFFER_PASSES = 20


# --- sealing ---------------------------------------------------------------------------------------


def _seal(row: ScheduleRow, record: rules.ScheduleRecord) -> None:
    row.data = encryption.seal(
        row.namespace_id,
        rules.dump(record),
        encryption.schedule_aad(row.namespace_id, row.schedule_id, "data"),
    )


def open_record(row: ScheduleRow) -> rules.ScheduleRecord:
    return rules.load(
        encryption.unseal(
            row.namespace_id, row.data, encryption.schedule_aad(row.namespace_id, row.schedule_id, "data")
        )
    )


def memo_of(row: ScheduleRow) -> Memo | None:
    if not row.memo:
        return None
    return Memo.FromString(
        encryption.unseal(
            row.namespace_id, row.memo, encryption.schedule_aad(row.namespace_id, row.schedule_id, "memo")
        )
    )


def _not_found(schedule_id: str) -> NotFound:
    # Temporal keeps each schedule in a workflow, and its NotFound names that workflow.
    return NotFound(f"workflow not found for ID: {_SCHEDULER_PREFIX}{schedule_id}")


def _get(namespace: Namespace, schedule_id: str, *, lock: bool = False) -> ScheduleRow:
    rows = ScheduleRow.objects.filter(namespace=namespace, schedule_id=schedule_id)
    row = (rows.select_for_update() if lock else rows).first()
    if row is None:
        raise _not_found(schedule_id)
    return row


def jitter_seed_of(row: ScheduleRow) -> str:
    return rules.jitter_seed(str(row.namespace_id), row.schedule_id)


# --- validation ------------------------------------------------------------------------------------


def _canonical_schedule(schedule: Schedule) -> None:
    """Compile the spec to its canonical form in place and check the action, as Temporal's frontend does."""
    try:
        canonical = compile_spec(schedule.spec).spec
    except SpecError as e:
        raise InvalidArgument(f"Invalid schedule spec: {e}") from None
    schedule.spec.CopyFrom(canonical)
    if not schedule.action.HasField("start_workflow"):
        return
    action = schedule.action.start_workflow
    validation.require_id(action.workflow_id + _TIMESTAMP_SUFFIX, "WorkflowId")
    if not action.workflow_id:
        raise InvalidArgument("WorkflowId is not set on request.")
    if not action.workflow_type.name:
        raise InvalidArgument("WorkflowType is not set on request.")
    validation.require_task_queue(action.task_queue.name)
    if not action.task_queue.kind:
        action.task_queue.kind = TaskQueueKind.TASK_QUEUE_KIND_NORMAL
    name: Literal["workflow_execution_timeout", "workflow_run_timeout", "workflow_task_timeout"]
    for name, label in (
        ("workflow_execution_timeout", "WorkflowExecutionTimeout"),
        ("workflow_run_timeout", "WorkflowRunTimeout"),
        ("workflow_task_timeout", "WorkflowTaskTimeout"),
    ):
        if action.HasField(name):
            validation.non_negative(getattr(action, name), label)
    if action.cron_schedule:
        raise InvalidArgument("Scheduled workflow must not contain CronSchedule")
    if action.workflow_id_reuse_policy not in (
        WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_UNSPECIFIED,
        WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
    ):
        raise InvalidArgument("Scheduled workflow must not contain WorkflowIDReusePolicy")
    if action.HasField("retry_policy"):
        try:
            action.retry_policy.CopyFrom(retry.normalized(action.retry_policy))
        except retry.RetryPolicyError as e:
            raise InvalidArgument(str(e)) from None


def _check_request_id(request_id: str) -> None:
    if not request_id:
        raise InvalidArgument("RequestId is not set on request.")
    if len(request_id) > validation.MAX_ID_LENGTH:
        raise InvalidArgument("RequestId length exceeds limit.")


# --- the tick ----------------------------------------------------------------------------------------


def _outcome(workflow_id: str, execution: Execution | None) -> rules.RunOutcome:
    """How a watched run ended, read from its close event (a deleted run ended with nothing to carry)."""
    if execution is None:
        return rules.RunOutcome(
            workflow_id=workflow_id, status=rules.Status.WORKFLOW_EXECUTION_STATUS_TERMINATED
        )
    close = None
    for event in store.history_events(execution, first_event_id=max(execution.next_event_id - 1, 1)):
        close = event
    result, failure, message = b"", b"", ""
    which = close.WhichOneof("attributes") if close is not None else None
    attrs: Any = getattr(close, which) if which else None  # the close event's attributes, of its type
    fields = attrs.DESCRIPTOR.fields_by_name if attrs is not None else {}
    if "result" in fields and attrs.HasField("result"):
        result = attrs.result.SerializeToString()
    if "failure" in fields and attrs.HasField("failure"):
        failure = attrs.failure.SerializeToString()
        message = attrs.failure.message
    elif execution.status != rules.Status.WORKFLOW_EXECUTION_STATUS_COMPLETED:
        status_name = (
            rules.Status.Name(rules.Status.ValueType(execution.status))
            .removeprefix("WORKFLOW_EXECUTION_STATUS_")
            .lower()
        )
        failure = Failure(message=f"workflow {status_name}").SerializeToString()
    return rules.RunOutcome(
        workflow_id=workflow_id,
        status=execution.status,
        result=result,
        failure=failure,
        failure_message=message,
    )


def _still_running(row: ScheduleRow, workflow_id: str, first_run_id: str) -> tuple[bool, Execution | None]:
    """Whether the chain the schedule started as (workflow_id, first_run_id) still runs, and its newest run."""
    current = CurrentRun.objects.filter(namespace_id=row.namespace_id, workflow_id=workflow_id).first()
    if current is None:
        return False, None
    execution = Execution.objects.filter(
        namespace_id=row.namespace_id, workflow_id=workflow_id, run_id=current.run_id
    ).first()
    if execution is None or execution.status not in OPEN_STATUSES:
        return False, execution
    if execution.run_id == first_run_id or store.decode_state(execution).first_run_id == first_run_id:
        return True, execution
    return False, None  # the id was reused by another chain: ours ended unseen


def _refresh(row: ScheduleRow, record: rules.ScheduleRecord) -> None:
    """Check every run the schedule counts as running (the newest run of its chain); record those that closed."""
    for watched in list(record.info.running_workflows):
        running, execution = _still_running(row, watched.workflow_id, watched.run_id)
        if not running:
            rules.run_closed(record, _outcome(watched.workflow_id, execution))


def _start(
    namespace: Namespace,
    row: ScheduleRow,
    record: rules.ScheduleRecord,
    start: rules.BufferedStart,
    now: datetime,
) -> None:
    action = record.schedule.action.start_workflow
    workflow_id = rules.scheduled_workflow_id(action.workflow_id, start.nominal)
    overlap = rules.resolve_overlap(record.schedule, start.overlap)
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=workflow_id,
        workflow_type=action.workflow_type,
        task_queue=action.task_queue,
        input=action.input if action.HasField("input") else None,
        workflow_execution_timeout=action.workflow_execution_timeout
        if action.HasField("workflow_execution_timeout")
        else None,
        workflow_run_timeout=action.workflow_run_timeout if action.HasField("workflow_run_timeout") else None,
        workflow_task_timeout=action.workflow_task_timeout
        if action.HasField("workflow_task_timeout")
        else None,
        identity=f"temporal-scheduler-{namespace.name}-{row.schedule_id}",
        request_id=start.request_id,
        workflow_id_reuse_policy=WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
        if start.manual
        else WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
        retry_policy=action.retry_policy if action.HasField("retry_policy") else None,
        memo=action.memo if action.HasField("memo") else None,
        search_attributes=rules.action_search_attributes(
            action.search_attributes if action.HasField("search_attributes") else None,
            schedule_id=row.schedule_id,
            nominal=start.nominal,
        ),
        header=action.header if action.HasField("header") else None,
        user_metadata=action.user_metadata if action.HasField("user_metadata") else None,
        priority=action.priority if action.HasField("priority") else None,
    )
    # Allow-all runs overlap freely, so they neither receive nor hand on results (as in Temporal).
    if overlap != rules.ALLOW_ALL:
        if record.last_completion_result:
            request.last_completion_result.CopyFrom(Payloads.FromString(record.last_completion_result))
        if record.continued_failure:
            request.continued_failure.CopyFrom(Failure.FromString(record.continued_failure))
    try:
        workflows.require_accepting_starts(namespace=namespace)
        result = workflows.workflow_start(namespace=namespace, request=request)
    except EngineError as e:
        log.warning("schedule %s could not start %s: %s", row.schedule_id, workflow_id, e.message)
        return
    rules.record_action(
        record,
        start,
        workflow_id=workflow_id,
        run_id=result.run_id,
        started_at=now,
        track=overlap != rules.ALLOW_ALL,
    )


def _cancel_or_terminate(namespace: Namespace, record: rules.ScheduleRecord, *, terminate: bool) -> None:
    for execution in list(record.info.running_workflows):
        try:
            if terminate:
                workflows.workflow_terminate(
                    namespace=namespace,
                    workflow_id=execution.workflow_id,
                    run_id="",
                    reason="terminated by schedule overlap policy",
                    details=None,
                    identity="temporal-scheduler",
                )
            else:
                workflows.workflow_request_cancel(
                    namespace=namespace,
                    workflow_id=execution.workflow_id,
                    run_id="",
                    identity="temporal-scheduler",
                    reason="cancelled by schedule overlap policy",
                )
        except EngineError as e:
            log.info("overlap policy could not stop %s: %s", execution.workflow_id, e.message)


def _process_buffer(
    namespace: Namespace, row: ScheduleRow, record: rules.ScheduleRecord, now: datetime
) -> bool:
    """One pass of the overlap policy over the buffer; True if another pass may do more."""
    if not record.schedule.action.HasField("start_workflow") or not record.buffered:
        record.buffered = []
        return False
    running = bool(record.info.running_workflows)
    plan = rules.plan_buffer(
        record.buffered, running=running, resolve=lambda p: rules.resolve_overlap(record.schedule, p)
    )
    record.buffered = plan.new_buffer
    record.info.overlap_skipped += plan.overlap_skipped
    starts = list(plan.overlapping_starts)
    if plan.non_overlapping_start is not None:
        starts.append(plan.non_overlapping_start)
    again = False
    for start in starts:
        if not rules.can_take_action(record, manual=start.manual, decrement=True):
            again = True
            continue
        _start(namespace, row, record, start, now)
    if plan.need_terminate:
        _cancel_or_terminate(namespace, record, terminate=True)
        # A terminated run closes in the same transaction: see it closed and start the next now.
        _refresh(row, record)
        again = again or bool(record.buffered)
    elif plan.need_cancel:
        _cancel_or_terminate(namespace, record, terminate=False)
    return again


def _tick(
    namespace: Namespace, row: ScheduleRow, record: rules.ScheduleRecord, now: datetime
) -> CompiledSpec | None:
    """Take every action due by `now`, apply the overlap policy, and set the next wake-up (in the caller's
    transaction, on a locked row)."""
    spec = rules.compiled(record)
    seed = jitter_seed_of(row)
    rules.advance(record, spec, seed, now)
    _refresh(row, record)
    for _ in range(_MAX_BUFFER_PASSES):
        if not _process_buffer(namespace, row, record, now):
            break
    row.next_wakeup_at = rules.next_wakeup(record, spec, seed, now)
    return spec


def _save(row: ScheduleRow, record: rules.ScheduleRecord, *, create: bool = False) -> None:
    _seal(row, record)
    # A schedule that was opened, ticked or changed and sealed again is healthy: past failures (and a
    # parking, when its owner fixed it by an update) are cleared.
    row.failures, row.last_error, row.parked_at = 0, "", None
    if create:
        row.save(force_insert=True)
    else:
        row.save(
            update_fields=[
                "next_wakeup_at",
                "data",
                "memo",
                "search_attributes",
                "failures",
                "last_error",
                "parked_at",
            ]
        )
    if row.next_wakeup_at is not None:
        wakeups.schedule_due(row.shard)


# --- API-facing services ------------------------------------------------------------------------------


def schedule_create(*, namespace: Namespace, request: CreateScheduleRequest) -> int:
    """Register a schedule and take whatever its initial patch asks (trigger now, backfills) at once.

    Returns the conflict token. Raises:
        InvalidArgument: a bad spec or action (Temporal's messages).
        AlreadyExists: the schedule id is taken (with WorkflowExecutionAlreadyStartedFailure details).
    """
    validation.require_id(_SCHEDULER_PREFIX + request.schedule_id, "WorkflowId")
    if not request.schedule_id:
        raise InvalidArgument("ScheduleId is not set on request.")
    _check_request_id(request.request_id)
    schedule = Schedule()
    schedule.CopyFrom(request.schedule)
    _canonical_schedule(schedule)
    now = clock.now()
    rules.ensure_defaults(schedule)
    record = rules.ScheduleRecord(schedule=schedule, info=ScheduleInfo(), last_processed=now)
    record.info.create_time.CopyFrom(rules.timestamp(now))
    row = ScheduleRow(
        namespace=namespace,
        schedule_id=request.schedule_id,
        shard=ids.shard_for(namespace.id, _SCHEDULER_PREFIX + request.schedule_id, settings.PERDURA_SHARDS),
        created_at=now,
        search_attributes=request.search_attributes.SerializeToString()
        if request.HasField("search_attributes") and request.search_attributes.indexed_fields
        else b"",
    )
    if request.HasField("memo") and request.memo.fields:
        row.memo = encryption.seal(
            namespace.id,
            request.memo.SerializeToString(),
            encryption.schedule_aad(namespace.id, request.schedule_id, "memo"),
        )
    if request.HasField("initial_patch"):
        rules.apply_patch(record, request.initial_patch, now)
    try:
        with transaction.atomic():
            _tick(namespace, row, record, now)
            _save(row, record, create=True)
    except IntegrityError:
        raise AlreadyExists(
            f'schedule "{request.schedule_id}" is already registered',
            WorkflowExecutionAlreadyStartedFailure(),
        ) from None
    return record.conflict_token


def schedule_describe(*, namespace: Namespace, schedule_id: str) -> DescribeScheduleResponse:
    """Raises NotFound."""
    row = _get(namespace, schedule_id)
    record = open_record(row)
    spec = rules.compiled(record)
    schedule = Schedule()
    schedule.CopyFrom(record.schedule)
    clean(schedule.spec)
    info = rules.describe_info(record, spec, jitter_seed_of(row))
    # As Temporal's describe does, show only runs still going (the close transfer may not have landed yet).
    running = [e for e in info.running_workflows if _still_running(row, e.workflow_id, e.run_id)[0]]
    del info.running_workflows[:]
    info.running_workflows.extend(running)
    return DescribeScheduleResponse(
        schedule=schedule,
        info=info,
        memo=memo_of(row),
        search_attributes=SearchAttributes.FromString(row.search_attributes)
        if row.search_attributes
        else None,
        conflict_token=record.conflict_token.to_bytes(8, "big"),
    )


def _conflict(token: bytes, record: rules.ScheduleRecord) -> bool:
    return bool(token) and int.from_bytes(token, "big") != record.conflict_token


def schedule_update(*, namespace: Namespace, request: UpdateScheduleRequest) -> None:
    """Replace the schedule (spec, action, policies, state); a stale conflict token changes nothing.

    Raises NotFound, InvalidArgument.
    """
    _check_request_id(request.request_id)
    schedule = Schedule()
    schedule.CopyFrom(request.schedule)
    _canonical_schedule(schedule)
    with transaction.atomic():
        row = _get(namespace, request.schedule_id, lock=True)
        record = open_record(row)
        if _conflict(request.conflict_token, record):
            # Temporal drops a conflicting update without an error (the scheduler workflow ignores it).
            return
        now = clock.now()
        rules.apply_update(record, schedule, now)
        if request.HasField("memo"):
            row.memo = (
                encryption.seal(
                    row.namespace_id,
                    request.memo.SerializeToString(),
                    encryption.schedule_aad(row.namespace_id, row.schedule_id, "memo"),
                )
                if request.memo.fields
                else b""
            )
        if request.HasField("search_attributes"):
            fields = request.search_attributes.indexed_fields
            row.search_attributes = request.search_attributes.SerializeToString() if fields else b""
        _tick(namespace, row, record, now)
        _save(row, record)


def schedule_patch(*, namespace: Namespace, request: PatchScheduleRequest) -> None:
    """Trigger now, backfill, pause or unpause; the actions it implies are taken before it returns.

    Raises NotFound, InvalidArgument.
    """
    if not request.HasField("patch"):
        raise InvalidArgument("Patch is not set on request.")
    if len(request.request_id) > validation.MAX_ID_LENGTH:
        raise InvalidArgument("RequestId length exceeds limit.")
    if len(request.patch.pause) > _MAX_NOTES or len(request.patch.unpause) > _MAX_NOTES:
        raise InvalidArgument("Schedule notes exceeds limit.")
    with transaction.atomic():
        row = _get(namespace, request.schedule_id, lock=True)
        record = open_record(row)
        now = clock.now()
        rules.apply_patch(record, request.patch, now)
        _tick(namespace, row, record, now)
        _save(row, record)


def schedule_delete(*, namespace: Namespace, schedule_id: str) -> None:
    """Delete the schedule; runs it started keep running. Raises NotFound."""
    if ScheduleRow.objects.filter(namespace=namespace, schedule_id=schedule_id).delete()[0] == 0:
        raise _not_found(schedule_id)


def schedule_matching_times(
    *, namespace: Namespace, request: ListScheduleMatchingTimesRequest
) -> list[Timestamp]:
    """The schedule's action times in (start, end]. Raises NotFound, InvalidArgument."""
    if not request.HasField("start_time") or not request.HasField("end_time"):
        raise InvalidArgument("missing or invalid query")
    row = _get(namespace, request.schedule_id)
    record = open_record(row)
    spec = rules.compiled(record)
    if spec is None:
        raise InvalidArgument(f"invalid schedule: {record.info.invalid_schedule_error}")
    return rules.list_matching_times(
        spec, jitter_seed_of(row), request.start_time.ToDatetime(UTC), request.end_time.ToDatetime(UTC)
    )


def schedule_tick_locked(row: ScheduleRow, now: datetime) -> None:
    """On a locked, due schedule row, inside the caller's transaction: take every action due by `now`
    and save the record with its next wake-up (the shard's tick, engine/shards/schedules.py)."""
    namespace = Namespace.objects.get(pk=row.namespace_id)
    record = open_record(row)
    _tick(namespace, row, record, now)
    _save(row, record)
