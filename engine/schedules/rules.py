"""The scheduler's rules, pure: which actions a span of time implies, what the overlap policy does with them,
what a closed run changes, and what Describe shows. The service layer does the I/O around them.

The behaviour follows Temporal's scheduler workflow (service/worker/scheduler/workflow.go, buffer.go).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import (
    Payload,
    SearchAttributes,
    WorkflowExecution,
)
from temporalio.api.enums.v1 import ScheduleOverlapPolicy, WorkflowExecutionStatus
from temporalio.api.schedule.v1 import (
    Schedule,
    ScheduleActionResult,
    ScheduleInfo,
    ScheduleListInfo,
    SchedulePatch,
)

from engine.schedules.calendar import SpecError
from engine.schedules.spec import CompiledSpec, NextTime, compile_spec

SKIP = ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_SKIP
BUFFER_ONE = ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE
BUFFER_ALL = ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL
CANCEL_OTHER = ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER
TERMINATE_OTHER = ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_TERMINATE_OTHER
ALLOW_ALL = ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL
UNSPECIFIED = ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_UNSPECIFIED

Status = WorkflowExecutionStatus
RUNNING = Status.WORKFLOW_EXECUTION_STATUS_RUNNING

# Temporal's "tweakables" at their current defaults.
DEFAULT_CATCHUP_WINDOW = timedelta(days=365)
MIN_CATCHUP_WINDOW = timedelta(seconds=10)
FUTURE_ACTION_COUNT = 10
RECENT_ACTION_COUNT = 10
FUTURE_ACTION_COUNT_FOR_LIST = 5
RECENT_ACTION_COUNT_FOR_LIST = 5
MAX_BUFFER_SIZE = 1000
BACKFILLS_PER_ITERATION = 10
MAX_LIST_MATCHING_TIMES = 1000

SCHEDULED_START_TIME = "TemporalScheduledStartTime"
SCHEDULED_BY_ID = "TemporalScheduledById"


@dataclass(slots=True)
class BufferedStart:
    """An action waiting for its turn under the overlap policy."""

    nominal: datetime
    actual: datetime
    overlap: int
    manual: bool
    request_id: str


@dataclass(slots=True)
class Backfill:
    """A backfill still being worked through, a few actions per wake-up."""

    start: datetime
    end: datetime
    overlap: int


@dataclass(slots=True)
class ScheduleRecord:
    """Everything a schedule keeps: the user's schedule, the visible info, and the scheduler's own state."""

    schedule: Schedule
    info: ScheduleInfo
    last_processed: datetime
    conflict_token: int = 1
    buffered: list[BufferedStart] = field(default_factory=list)
    backfills: list[Backfill] = field(default_factory=list)
    last_completion_result: bytes = b""
    """The newest completed run's result (a serialized Payloads), handed to the next run."""
    continued_failure: bytes = b""
    """The failure of the newest run if it failed after that result (a serialized Failure)."""
    sequence: int = 0
    """Counts buffered starts, to give each a request id of its own."""


# --- encoding ---------------------------------------------------------------------------------------


_CALENDAR_START = datetime.min.replace(tzinfo=UTC)


def _ts(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value)


def dump(record: ScheduleRecord) -> bytes:
    """The record as bytes (to be sealed by the caller)."""
    b64 = base64.b64encode
    return json.dumps(
        {
            "schedule": b64(record.schedule.SerializeToString()).decode(),
            "info": b64(record.info.SerializeToString()).decode(),
            "last_processed": _ts(record.last_processed),
            "conflict_token": record.conflict_token,
            "buffered": [
                [_ts(b.nominal), _ts(b.actual), int(b.overlap), b.manual, b.request_id]
                for b in record.buffered
            ],
            "backfills": [[_ts(b.start), _ts(b.end), int(b.overlap)] for b in record.backfills],
            "last_completion_result": b64(record.last_completion_result).decode(),
            "continued_failure": b64(record.continued_failure).decode(),
            "sequence": record.sequence,
        }
    ).encode()


def load(data: bytes) -> ScheduleRecord:
    raw = json.loads(data)
    b64 = base64.b64decode
    return ScheduleRecord(
        schedule=Schedule.FromString(b64(raw["schedule"])),
        info=ScheduleInfo.FromString(b64(raw["info"])),
        last_processed=_dt(raw["last_processed"]),
        conflict_token=raw["conflict_token"],
        buffered=[BufferedStart(_dt(n), _dt(a), o, m, r) for n, a, o, m, r in raw["buffered"]],
        backfills=[Backfill(_dt(s), _dt(e), o) for s, e, o in raw["backfills"]],
        last_completion_result=b64(raw["last_completion_result"]),
        continued_failure=b64(raw["continued_failure"]),
        sequence=raw["sequence"],
    )


def timestamp(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value.astimezone(UTC))
    return out


def _time(value: Timestamp) -> datetime:
    return value.ToDatetime(UTC)


# --- policies ---------------------------------------------------------------------------------------


def ensure_defaults(schedule: Schedule) -> None:
    """Fill the policies Describe shows even when unset: overlap SKIP and the catchup window."""
    policies = schedule.policies
    if policies.overlap_policy == UNSPECIFIED:
        policies.overlap_policy = SKIP
    policies.catchup_window.FromTimedelta(catchup_window(schedule))
    schedule.spec.SetInParent()
    schedule.action.SetInParent()
    schedule.state.SetInParent()


def catchup_window(schedule: Schedule) -> timedelta:
    if not schedule.policies.HasField("catchup_window"):
        return DEFAULT_CATCHUP_WINDOW
    return max(schedule.policies.catchup_window.ToTimedelta(), MIN_CATCHUP_WINDOW)


def resolve_overlap(schedule: Schedule, policy: int) -> int:
    if policy == UNSPECIFIED:
        policy = schedule.policies.overlap_policy
    return policy if policy != UNSPECIFIED else SKIP


def can_take_action(record: ScheduleRecord, *, manual: bool, decrement: bool = False) -> bool:
    """Manual actions always may; scheduled ones not while paused or out of remaining actions."""
    if manual:
        return True
    state = record.schedule.state
    if state.paused:
        return False
    if not state.limited_actions:
        return True
    if state.remaining_actions > 0:
        if decrement:
            state.remaining_actions -= 1
            record.conflict_token += 1
        return True
    return False


def compiled(record: ScheduleRecord) -> CompiledSpec | None:
    """The compiled spec, or None (with the error kept in info) if it no longer compiles."""
    try:
        spec = compile_spec(record.schedule.spec)
    except SpecError as e:
        record.info.invalid_schedule_error = str(e)
        return None
    record.info.invalid_schedule_error = ""
    return spec


def jitter_seed(namespace_id: str, schedule_id: str) -> str:
    return f"{namespace_id}-{schedule_id}"


# --- generating actions ------------------------------------------------------------------------------


def add_start(
    record: ScheduleRecord, nominal: datetime, actual: datetime, overlap: int, *, manual: bool
) -> None:
    if len(record.buffered) >= MAX_BUFFER_SIZE:
        record.info.buffer_dropped += 1
        return
    record.sequence += 1
    request_id = f"{record.info.create_time.ToJsonString()}/{record.sequence}"
    record.buffered.append(BufferedStart(nominal, actual, overlap, manual, request_id))


def process_time_range(
    record: ScheduleRecord,
    spec: CompiledSpec,
    seed: str,
    start: datetime,
    end: datetime,
    *,
    overlap: int,
    manual: bool,
    limit: list[int] | None = None,
) -> NextTime | None:
    """Buffer the actions whose times fall in (start, end]; returns the first time after them.

    Scheduled (not manual) times older than the catchup window are counted as missed instead, and
    times before the last update are dropped (they belong to the previous spec).
    """
    if not can_take_action(record, manual=manual):
        return spec.next_time(end, seed=seed)
    window = catchup_window(record.schedule)
    update_time = _time(record.info.update_time) if record.info.HasField("update_time") else None
    next_time = spec.next_time(start, seed=seed)
    while next_time is not None and next_time.actual <= end:
        if not manual and update_time is not None and update_time > next_time.actual:
            pass
        elif not manual and end - next_time.actual > window:
            record.info.missed_catchup_window += 1
        else:
            add_start(record, next_time.nominal, next_time.actual, overlap, manual=manual)
            if limit is not None:
                limit[0] -= 1
                if limit[0] <= 0:
                    return spec.next_time(next_time.actual, seed=seed)
        next_time = spec.next_time(next_time.actual, seed=seed)
    return next_time


def advance(record: ScheduleRecord, spec: CompiledSpec | None, seed: str, now: datetime) -> None:
    """Everything the passing of time implies: scheduled actions due by `now`, then pending backfills."""
    start = record.last_processed
    end = max(now, start)
    if spec is not None:
        process_time_range(record, spec, seed, start, end, overlap=UNSPECIFIED, manual=False)
    record.last_processed = end
    if spec is not None:
        process_backfills(record, spec, seed)


def process_backfills(record: ScheduleRecord, spec: CompiledSpec, seed: str) -> None:
    limit = [BACKFILLS_PER_ITERATION]
    while record.backfills and limit[0] > 0 and len(record.buffered) < MAX_BUFFER_SIZE // 2:
        backfill = record.backfills[0]
        following = process_time_range(
            record,
            spec,
            seed,
            backfill.start,
            backfill.end,
            overlap=backfill.overlap,
            manual=True,
            limit=limit,
        )
        if following is None or following.actual > backfill.end:
            record.backfills.pop(0)
        else:
            backfill.start = following.actual - timedelta(milliseconds=1)


def has_allow_all_backfills(record: ScheduleRecord) -> bool:
    return (
        bool(record.backfills) and resolve_overlap(record.schedule, record.backfills[0].overlap) == ALLOW_ALL
    )


def apply_patch(record: ScheduleRecord, patch: SchedulePatch, now: datetime) -> None:
    """Trigger-immediately and backfill requests join the buffer; pause and unpause set the notes."""
    if patch.HasField("trigger_immediately"):
        trigger = patch.trigger_immediately
        at = _time(trigger.scheduled_time) if trigger.HasField("scheduled_time") else now
        add_start(record, at, at, trigger.overlap_policy, manual=True)
    for request in patch.backfill_request:
        if len(record.backfills) >= MAX_BUFFER_SIZE:
            record.info.buffer_dropped += 1
            continue
        # Inclusive start: a backfill from exactly a matching time takes that time too (but the calendar's
        # first instant, 0001-01-01, has no millisecond before it).
        start = _time(request.start_time)
        if start - _CALENDAR_START >= timedelta(milliseconds=1):
            start -= timedelta(milliseconds=1)
        record.backfills.append(Backfill(start, _time(request.end_time), request.overlap_policy))
    if patch.pause:
        record.schedule.state.paused = True
        record.schedule.state.notes = patch.pause
        record.conflict_token += 1
    if patch.unpause:
        record.schedule.state.paused = False
        record.schedule.state.notes = patch.unpause
        record.conflict_token += 1


def apply_update(record: ScheduleRecord, schedule: Schedule, now: datetime) -> None:
    """Replace spec, action, policies and state (never the info); times before now are not taken."""
    record.schedule.CopyFrom(schedule)
    ensure_defaults(record.schedule)
    record.info.update_time.CopyFrom(timestamp(now))
    record.last_processed = max(record.last_processed, now)
    record.conflict_token += 1


# --- overlap ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class BufferPlan:
    """What to do with the buffer now (Temporal's ProcessBuffer)."""

    overlapping_starts: list[BufferedStart] = field(default_factory=list)
    non_overlapping_start: BufferedStart | None = None
    new_buffer: list[BufferedStart] = field(default_factory=list)
    need_cancel: bool = False
    need_terminate: bool = False
    overlap_skipped: int = 0


def plan_buffer(buffer: list[BufferedStart], *, running: bool, resolve: Callable[[int], int]) -> BufferPlan:
    """Apply each buffered start's overlap policy given whether a (non allow-all) run is still going."""
    plan = BufferPlan()
    for start in buffer:
        policy = resolve(start.overlap)
        if policy == ALLOW_ALL:
            plan.overlapping_starts.append(start)
            continue
        if not running and plan.non_overlapping_start is None:
            plan.non_overlapping_start = start
            continue
        if policy == SKIP:
            plan.overlap_skipped += 1
        elif policy == BUFFER_ONE:
            if not plan.new_buffer:
                plan.new_buffer.append(start)
            else:
                plan.overlap_skipped += 1
        elif policy == BUFFER_ALL:
            plan.new_buffer.append(start)
        elif policy in (CANCEL_OTHER, TERMINATE_OTHER):
            if running:
                if policy == CANCEL_OTHER:
                    plan.need_cancel = True
                else:
                    plan.need_terminate = True
                plan.new_buffer.append(start)
            else:
                plan.non_overlapping_start = start
    if plan.need_cancel or plan.need_terminate:
        # The ones we would start would be cancelled or terminated at once: don't start them.
        plan.overlapping_starts = []
    return plan


# --- starting ---------------------------------------------------------------------------------------


def scheduled_workflow_id(workflow_id: str, nominal: datetime) -> str:
    """`<workflow id>-<nominal time RFC 3339>`: the id Temporal gives each action's run."""
    return f"{workflow_id}-{nominal.astimezone(UTC).replace(microsecond=0).strftime('%Y-%m-%dT%H:%M:%SZ')}"


def _json_payload(value: str, sa_type: str) -> Payload:
    return Payload(
        metadata={"encoding": b"json/plain", "type": sa_type.encode()}, data=json.dumps(value).encode()
    )


def action_search_attributes(
    base: SearchAttributes | None, *, schedule_id: str, nominal: datetime
) -> SearchAttributes:
    """The action's search attributes plus the two Temporal adds: scheduled start time and schedule id."""
    out = SearchAttributes()
    if base is not None:
        out.CopyFrom(base)
    stamp = nominal.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    out.indexed_fields[SCHEDULED_START_TIME].CopyFrom(_json_payload(stamp, "Datetime"))
    out.indexed_fields[SCHEDULED_BY_ID].CopyFrom(_json_payload(schedule_id, "Keyword"))
    return out


def scheduled_by(search_attributes: bytes) -> str | None:
    """The schedule id a run was started by (from its TemporalScheduledById search attribute), if any."""
    if not search_attributes or SCHEDULED_BY_ID.encode() not in search_attributes:
        return None
    payload = SearchAttributes.FromString(search_attributes).indexed_fields.get(SCHEDULED_BY_ID)
    if payload is None:
        return None
    try:
        value = json.loads(payload.data)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def record_action(
    record: ScheduleRecord,
    start: BufferedStart,
    *,
    workflow_id: str,
    run_id: str,
    started_at: datetime,
    track: bool,
) -> None:
    """Count a started action; a non-overlapping one is watched as running (allow-all ones are not)."""
    execution = WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
    result = ScheduleActionResult(
        schedule_time=timestamp(start.actual),
        actual_time=timestamp(started_at),
        start_workflow_result=execution,
        start_workflow_status=RUNNING,
    )
    info = record.info
    info.action_count += 1
    info.recent_actions.append(result)
    while len(info.recent_actions) > RECENT_ACTION_COUNT:
        del info.recent_actions[0]
    if track:
        info.running_workflows.append(execution)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run the schedule started ended (a closed status, with its result or failure)."""

    workflow_id: str
    status: int
    result: bytes = b""
    """Serialized Payloads of a completed run."""
    failure: bytes = b""
    """Serialized Failure of a failed (or timed out, cancelled, terminated) run."""
    failure_message: str = ""


def run_closed(record: ScheduleRecord, outcome: RunOutcome) -> None:
    """A watched run closed: stop counting it as running; carry its result on; pause on failure."""
    info = record.info
    for index, execution in enumerate(info.running_workflows):
        if execution.workflow_id == outcome.workflow_id:
            del info.running_workflows[index]
            break
    for action in info.recent_actions:
        if action.start_workflow_result.workflow_id == outcome.workflow_id:
            action.start_workflow_status = Status.ValueType(outcome.status)
    state = record.schedule.state
    failed = outcome.status in (
        Status.WORKFLOW_EXECUTION_STATUS_FAILED,
        Status.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
    )
    if record.schedule.policies.pause_on_failure and failed and not state.paused:
        state.paused = True
        if outcome.status == Status.WORKFLOW_EXECUTION_STATUS_FAILED:
            state.notes = f"paused due to workflow failure: {outcome.workflow_id}: {outcome.failure_message}"
        else:
            state.notes = f"paused due to workflow timeout: {outcome.workflow_id}"
        record.conflict_token += 1
    if outcome.status == Status.WORKFLOW_EXECUTION_STATUS_COMPLETED:
        record.last_completion_result = outcome.result
        record.continued_failure = b""
    elif outcome.failure:
        record.continued_failure = outcome.failure


# --- reading ----------------------------------------------------------------------------------------


def future_action_times(
    record: ScheduleRecord, spec: CompiledSpec | None, seed: str, count: int
) -> list[Timestamp]:
    """The next `count` action times (no more than the remaining actions), none before the last update."""
    if spec is None:
        return []
    state = record.schedule.state
    if state.limited_actions:
        count = min(count, state.remaining_actions)
    update_time = _time(record.info.update_time) if record.info.HasField("update_time") else None
    out: list[Timestamp] = []
    after = record.last_processed
    while len(out) < count:
        found = spec.next_time(after, seed=seed)
        if found is None:
            break
        after = found.actual
        if update_time is not None and update_time > found.actual:
            continue
        out.append(timestamp(found.actual))
    return out


def describe_info(record: ScheduleRecord, spec: CompiledSpec | None, seed: str) -> ScheduleInfo:
    info = ScheduleInfo()
    info.CopyFrom(record.info)
    del info.future_action_times[:]
    info.future_action_times.extend(future_action_times(record, spec, seed, FUTURE_ACTION_COUNT))
    info.buffer_size = len(record.buffered)
    return info


def list_info(record: ScheduleRecord, spec: CompiledSpec | None, seed: str) -> ScheduleListInfo:
    listed_spec = type(record.schedule.spec)()
    listed_spec.CopyFrom(record.schedule.spec)
    listed_spec.timezone_data = b""
    return ScheduleListInfo(
        spec=listed_spec,
        workflow_type=record.schedule.action.start_workflow.workflow_type,
        notes=record.schedule.state.notes,
        paused=record.schedule.state.paused,
        recent_actions=list(record.info.recent_actions)[-RECENT_ACTION_COUNT_FOR_LIST:],
        future_action_times=future_action_times(record, spec, seed, FUTURE_ACTION_COUNT_FOR_LIST),
    )


def next_wakeup(
    record: ScheduleRecord, spec: CompiledSpec | None, seed: str, now: datetime
) -> datetime | None:
    """When the scheduler must look again: the next action time, soon for more backfills, or never.

    Closing runs wake it on their own (a transfer from the run's close), so waiting on them needs no time.
    """
    if has_allow_all_backfills(record):
        return now + timedelta(seconds=1)
    if record.backfills and not record.info.running_workflows:
        return now + timedelta(seconds=1)
    if spec is None or not can_take_action(record, manual=False):
        return None
    found = spec.next_time(record.last_processed, seed=seed)
    return found.actual if found is not None else None


def list_matching_times(spec: CompiledSpec, seed: str, start: datetime, end: datetime) -> list[Timestamp]:
    out: list[Timestamp] = []
    after = start
    for _ in range(MAX_LIST_MATCHING_TIMES):
        found = spec.next_time(after, seed=seed)
        if found is None or found.actual > end:
            break
        out.append(timestamp(found.actual))
        after = found.actual
    return out
