"""Operator controls of pending activities: pause, unpause, reset and option updates, as Temporal has them.

None of them writes an event: they change the activity's mutable state, its task row and its timeouts
(Temporal's service/history/api/{pause,unpause,reset}activity and updateactivityoptions). A running
attempt is never interrupted by the server; its heartbeats tell the worker (activity.HeartbeatAnswer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.common.v1 import Priority, RetryPolicy
from temporalio.api.enums.v1 import TaskQueueKind, TimeoutType
from temporalio.api.taskqueue.v1 import TaskQueue

from engine.errors import FailedPrecondition, InvalidArgument, NotFound
from engine.history import parking, retry
from engine.history.activity import MAX_ID_LENGTH, expiration, retry_policy, scheduled_attributes
from engine.history.errors import RunClosed
from engine.history.events import duration, seconds
from engine.history.mutation import Mutation, TaskKind, TimerKind
from engine.history.state import ActivityInfo

ACTIVITY_NOT_FOUND = (
    "Can't find pending activity with such ID. Invalid activityID or activity already completed"
)
ALREADY_PAUSED = "activity is already paused"
_TIMEOUT_FIELDS = (
    ("schedule_to_close_timeout", "ScheduleToCloseTimeout"),
    ("schedule_to_start_timeout", "ScheduleToStartTimeout"),
    ("start_to_close_timeout", "StartToCloseTimeout"),
    ("heartbeat_timeout", "HeartbeatTimeout"),
)


def _no_jitter() -> float:
    return 0.0


@dataclass(frozen=True, slots=True)
class Target:
    """Which pending activities a control applies to: one by id, all of a type, or all of them."""

    activity_id: str = ""
    activity_type: str = ""
    match_all: bool = False


def select(m: Mutation, target: Target) -> list[ActivityInfo]:
    """The run's pending activities `target` names, in scheduling order.

    Raises:
        RunClosed: the run is closed.
        NotFound: none matches.
    """
    if not m.state.running:
        raise RunClosed("workflow execution already completed")
    if target.activity_id:
        info = m.state.activity_by_id(target.activity_id)
        found = [] if info is None else [info]
    else:
        found = [
            info
            for _, info in sorted(m.state.activities.items())
            if target.match_all or info.activity_type == target.activity_type
        ]
    if not found:
        raise NotFound(ACTIVITY_NOT_FOUND)
    return found


# --- pause and unpause ---------------------------------------------------------------------------------


def pause(m: Mutation, *, target: Target, identity: str, reason: str, request_id: str) -> None:
    """Stop dispatching further attempts; a running attempt runs on and its result still counts.

    Pausing again with the same request id is a no-op (Temporal dedupes on it; two requests without one
    count as the same).

    Raises:
        FailedPrecondition: an activity is already paused by another request.
    """
    for info in select(m, target):
        if info.paused:
            if info.pause_request_id == request_id:
                continue
            raise FailedPrecondition(ALREADY_PAUSED)
        info.paused = True
        info.pause_time = m.now
        info.pause_identity = identity
        info.pause_reason = reason
        info.pause_request_id = request_id
        # Its task row, if any, is now stale (activity.start); its timeouts wait for the unpause.
        m.drop_timers(TimerKind.ACTIVITY_TIMEOUT, info.scheduled_event_id)
    parking.reindex(m)


def unpause(
    m: Mutation,
    *,
    target: Target,
    reset_attempts: bool = False,
    reset_heartbeat: bool = False,
    jitter: float = 0.0,
    draw: Callable[[], float] = _no_jitter,
) -> None:
    """Resume a paused activity: an attempt not running is dispatched now (or within `jitter` seconds).

    Activities that are not paused are left alone. `draw` returns a number in [0, 1) per activity.
    """
    for info in select(m, target):
        if not info.paused:
            continue
        _clear_pause(info)
        if reset_attempts:
            info.attempt = 1
        if reset_heartbeat:
            _clear_heartbeat(info)
        if info.started_time is None:
            _reschedule(m, info, m.now + timedelta(seconds=jitter * draw()))
        rearm_timeouts(m, info)
    parking.reindex(m)


def _clear_pause(info: ActivityInfo) -> None:
    info.paused = False
    info.pause_time = None
    info.pause_identity = ""
    info.pause_reason = ""
    info.pause_request_id = ""


def _clear_heartbeat(info: ActivityInfo) -> None:
    info.heartbeat_details = b""
    info.last_heartbeat_time = None


# --- reset ---------------------------------------------------------------------------------------------


def reset(
    m: Mutation,
    *,
    target: Target,
    reset_heartbeat: bool = False,
    keep_paused: bool = False,
    restore_original_options: bool = False,
    jitter: float = 0.0,
    draw: Callable[[], float] = _no_jitter,
) -> None:
    """Set the attempt back to 1; an activity not running (and not left paused) is dispatched again now.

    A running attempt runs on (its heartbeats report the reset; a token of an attempt above 1 is
    stale from now on); heartbeat details are cleared for the next attempt with `reset_heartbeat`.
    """
    for info in select(m, target):
        was_paused = info.paused
        info.attempt = 1
        info.reset_requested = True
        if reset_heartbeat:
            info.reset_heartbeats = True
        if restore_original_options:
            _set_options(info, original_options(info))
        if was_paused and not keep_paused:
            _clear_pause(info)
        if info.started_time is None and not info.paused:
            if reset_heartbeat:
                _clear_heartbeat(info)
            _reschedule(m, info, m.now + timedelta(seconds=jitter * draw()))
        rearm_timeouts(m, info)
    parking.reindex(m)


# --- options -------------------------------------------------------------------------------------------


def current_options(info: ActivityInfo) -> ActivityOptions:
    """The activity's options in force, as DescribeWorkflowExecution and UpdateActivityOptions show them."""
    policy = retry_policy(info)
    # Temporal keeps an activity's policy with its defaults filled in, even when one attempt is all it allows.
    if seconds(policy.initial_interval) == 0:
        policy.initial_interval.CopyFrom(duration(retry.DEFAULT_INITIAL_INTERVAL))
    if seconds(policy.maximum_interval) == 0:
        policy.maximum_interval.CopyFrom(
            duration(seconds(policy.initial_interval) * retry.DEFAULT_MAXIMUM_INTERVAL_COEFFICIENT)
        )
    if policy.backoff_coefficient == 0:
        policy.backoff_coefficient = retry.DEFAULT_BACKOFF_COEFFICIENT
    return ActivityOptions(
        task_queue=TaskQueue(name=info.task_queue),
        schedule_to_close_timeout=duration(info.schedule_to_close),
        schedule_to_start_timeout=duration(info.schedule_to_start),
        start_to_close_timeout=duration(info.start_to_close),
        heartbeat_timeout=duration(info.heartbeat),
        priority=current_priority(info),
        retry_policy=RetryPolicy(
            initial_interval=policy.initial_interval,
            backoff_coefficient=policy.backoff_coefficient,
            maximum_interval=policy.maximum_interval,
            maximum_attempts=policy.maximum_attempts,
        ),
    )


def current_priority(info: ActivityInfo) -> Priority:
    if info.priority is not None:
        return Priority.FromString(info.priority)
    return scheduled_attributes(info).priority


def original_options(info: ActivityInfo) -> ActivityOptions:
    """The options the activity was scheduled with (its ActivityTaskScheduled event)."""
    attrs = scheduled_attributes(info)
    return ActivityOptions(
        task_queue=TaskQueue(name=attrs.task_queue.name),
        schedule_to_close_timeout=attrs.schedule_to_close_timeout,
        schedule_to_start_timeout=attrs.schedule_to_start_timeout,
        start_to_close_timeout=attrs.start_to_close_timeout,
        heartbeat_timeout=attrs.heartbeat_timeout,
        priority=attrs.priority,
        retry_policy=attrs.retry_policy,
    )


def update_options(
    m: Mutation,
    *,
    target: Target,
    options: ActivityOptions | None,
    paths: list[str] | None,
    restore_original: bool = False,
) -> ActivityOptions:
    """Change the options of pending activities: the fields `paths` (a field mask) names, or the originals.

    Returns the options in force afterwards (of the last activity changed). An activity waiting for its
    next attempt is rescheduled by the new policy; a running one keeps running under the new timeouts.

    Raises:
        InvalidArgument: a missing mask or options, both a mask and restore_original, invalid options.
    """
    if restore_original and paths:
        raise InvalidArgument("Both UpdateMask and RestoreOriginal are provided")
    if restore_original:
        result = ActivityOptions()
        for info in select(m, target):
            result = original_options(info)
            _apply_options(m, info, result)
        return result
    if not m.state.running:
        raise RunClosed("workflow execution already completed")
    if options is None:
        raise InvalidArgument("ActivityOptions are not provided")
    infos = select(m, target)
    if paths is None:
        raise InvalidArgument("UpdateMask is not provided")
    fields = {_camel(path) for path in paths}
    for info in infos:
        result = current_options(info)
        _merge(result, options, fields)
        if any(field.startswith("retryPolicy.") for field in fields):
            _validate_retry_policy(result.retry_policy)
        elif "retryPolicy" in fields:
            try:
                result.retry_policy.CopyFrom(retry.normalized(result.retry_policy))
            except retry.RetryPolicyError as e:
                raise InvalidArgument(str(e)) from None
        _normalize(result, info, m.state.task_queue)
        _apply_options(m, info, result)
    return result


def _camel(path: str) -> str:
    """A field-mask path in the JSON (camelCase) spelling Temporal compares against."""
    parts = []
    for part in path.split("."):
        head, *rest = part.split("_")
        parts.append(head + "".join(word[:1].upper() + word[1:] for word in rest))
    return ".".join(parts)


def _merge(into: ActivityOptions, source: ActivityOptions, fields: set[str]) -> None:
    """Copy the masked fields of `source` into `into` (Temporal's activityoptions.MergeActivityOptions)."""
    if "taskQueue.name" in fields:
        if not source.HasField("task_queue"):
            raise InvalidArgument("TaskQueue is not provided")
        into.task_queue.name = source.task_queue.name
    for name, _ in _TIMEOUT_FIELDS:
        if _camel(name) in fields:
            getattr(into, name).CopyFrom(getattr(source, name))
    if "priority" in fields:
        into.priority.CopyFrom(source.priority)
    for name in ("priority_key", "fairness_key", "fairness_weight"):
        if "priority." + _camel(name) in fields:
            if not source.HasField("priority"):
                raise InvalidArgument("Priority is not provided")
            setattr(into.priority, name, getattr(source.priority, name))
    if "retryPolicy" in fields:
        if not source.HasField("retry_policy"):
            raise InvalidArgument("RetryPolicy is not provided")
        into.retry_policy.CopyFrom(source.retry_policy)
    for name in ("initial_interval", "backoff_coefficient", "maximum_interval", "maximum_attempts"):
        if "retryPolicy." + _camel(name) in fields:
            if not source.HasField("retry_policy"):
                raise InvalidArgument("RetryPolicy is not provided")
            if name.endswith("_interval"):
                getattr(into.retry_policy, name).CopyFrom(getattr(source.retry_policy, name))
            else:
                setattr(into.retry_policy, name, getattr(source.retry_policy, name))


def _validate_retry_policy(policy: RetryPolicy) -> None:
    """Temporal's retrypolicy.Validate, with its messages."""
    if policy.maximum_attempts == 1:
        return
    initial = seconds(policy.initial_interval)
    maximum = seconds(policy.maximum_interval)
    if initial < 0:
        raise InvalidArgument("invalid InitialInterval set on retry policy: negative duration")
    if policy.backoff_coefficient < 1:
        raise InvalidArgument("BackoffCoefficient cannot be less than 1 on retry policy.")
    if maximum < 0:
        raise InvalidArgument("invalid MaximumInterval set on retry policy: negative duration")
    if 0 < maximum < initial:
        raise InvalidArgument("MaximumInterval cannot be less than InitialInterval on retry policy.")
    if policy.maximum_attempts < 0:
        raise InvalidArgument("MaximumAttempts cannot be negative on retry policy.")


def _normalize(options: ActivityOptions, info: ActivityInfo, workflow_task_queue: str) -> None:
    """Validate the merged options and derive missing timeouts, as a ScheduleActivityTask command's are."""
    if not options.task_queue.name:
        options.task_queue.name = workflow_task_queue
    if len(options.task_queue.name) > MAX_ID_LENGTH:
        raise InvalidArgument(
            f"TaskQueue exceeds maximum allowed length ({len(options.task_queue.name)}/{MAX_ID_LENGTH})"
        )
    options.task_queue.kind = TaskQueueKind.TASK_QUEUE_KIND_NORMAL
    for name, label in _TIMEOUT_FIELDS:
        if seconds(getattr(options, name)) < 0:
            raise InvalidArgument(f"invalid {label}: negative duration")
    s2c = seconds(options.schedule_to_close_timeout)
    s2s = seconds(options.schedule_to_start_timeout)
    st2c = seconds(options.start_to_close_timeout)
    if s2c > 0:
        s2s = min(s2s, s2c) if s2s > 0 else s2c
        st2c = min(st2c, s2c) if st2c > 0 else s2c
    elif st2c > 0:
        s2c = 0.0  # an update has no run timeout to fall back on (Temporal passes none)
    else:
        raise InvalidArgument(
            "a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set on the activity. "
            f"ActivityId={info.activity_id} ActivityType={info.activity_type}"
        )
    options.schedule_to_close_timeout.CopyFrom(duration(s2c))
    options.schedule_to_start_timeout.CopyFrom(duration(s2s))
    options.start_to_close_timeout.CopyFrom(duration(st2c))
    options.heartbeat_timeout.CopyFrom(duration(min(seconds(options.heartbeat_timeout), st2c)))


def _set_options(info: ActivityInfo, options: ActivityOptions) -> None:
    info.task_queue = options.task_queue.name
    info.schedule_to_close = seconds(options.schedule_to_close_timeout)
    info.schedule_to_start = seconds(options.schedule_to_start_timeout)
    info.start_to_close = seconds(options.start_to_close_timeout)
    info.heartbeat = seconds(options.heartbeat_timeout)
    info.priority = options.priority.SerializeToString()
    # Only the policy's intervals and attempts change; its non-retryable error types stay (as Temporal's).
    policy = scheduled_attributes(info).retry_policy
    policy.initial_interval.CopyFrom(options.retry_policy.initial_interval)
    policy.backoff_coefficient = options.retry_policy.backoff_coefficient
    policy.maximum_interval.CopyFrom(options.retry_policy.maximum_interval)
    policy.maximum_attempts = options.retry_policy.maximum_attempts
    info.retry_policy = policy.SerializeToString()


def _apply_options(m: Mutation, info: ActivityInfo, options: ActivityOptions) -> None:
    _set_options(info, options)
    if info.started_time is None:
        # Waiting for its next attempt: dispatched again by the new policy (its old row is stale).
        _reschedule(m, info, _next_scheduled_time(info))
    rearm_timeouts(m, info)


def _next_scheduled_time(info: ActivityInfo) -> datetime:
    """When the next attempt is due under the policy in force (Temporal's GetNextScheduledTime)."""
    if info.attempt <= 1 or info.last_attempt_complete_time is None:
        return info.attempt_scheduled_time
    policy = retry_policy(info)
    try:
        interval = seconds(policy.initial_interval) * policy.backoff_coefficient ** (info.attempt - 1)
    except OverflowError:
        interval = float("inf")
    maximum = seconds(policy.maximum_interval)
    if maximum != 0 and (interval <= 0 or interval > maximum):
        interval = maximum
    if interval <= 0 or interval == float("inf"):
        return info.attempt_scheduled_time
    return info.last_attempt_complete_time + timedelta(seconds=interval)


# --- dispatch and timeouts -----------------------------------------------------------------------------


def _reschedule(m: Mutation, info: ActivityInfo, at: datetime) -> None:
    """Dispatch the current attempt (not running) at `at`, superseding its task row (Temporal's
    RegenerateActivityRetryTask); a paused activity gets no row until it is unpaused."""
    info.attempt_scheduled_time = at
    info.last_failure = b""
    if info.reset_heartbeats:
        _clear_heartbeat(info)
    info.reset_requested = False
    info.reset_heartbeats = False
    if info.paused:
        return
    delay = (at - m.now).total_seconds()
    info.task_visible_at = m.now + timedelta(seconds=max(delay, 0.0))
    m.task(TaskKind.ACTIVITY, info.task_queue, info.scheduled_event_id, info.attempt, delay=delay)


def rearm_timeouts(m: Mutation, info: ActivityInfo) -> None:
    """Replace the activity's timeout timers with those its state implies now (none while paused)."""
    sid = info.scheduled_event_id
    m.drop_timers(TimerKind.ACTIVITY_TIMEOUT, sid)
    if info.paused:
        return
    deadline = expiration(info)
    if deadline is not None:
        m.timer(
            TimerKind.ACTIVITY_TIMEOUT,
            deadline,
            event_id=sid,
            attempt=0,
            detail=TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE,
        )
    if info.started_time is None:
        if info.schedule_to_start > 0 and (
            info.schedule_to_close <= 0 or info.schedule_to_start < info.schedule_to_close
        ):
            m.timer(
                TimerKind.ACTIVITY_TIMEOUT,
                info.attempt_scheduled_time + timedelta(seconds=info.schedule_to_start),
                event_id=sid,
                attempt=info.attempt,
                detail=TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START,
            )
        return
    m.timer(
        TimerKind.ACTIVITY_TIMEOUT,
        info.started_time + timedelta(seconds=info.start_to_close),
        event_id=sid,
        attempt=info.attempt,
        detail=TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE,
    )
    if info.heartbeat > 0:
        m.timer(
            TimerKind.ACTIVITY_TIMEOUT,
            (info.last_heartbeat_time or info.started_time) + timedelta(seconds=info.heartbeat),
            event_id=sid,
            attempt=info.attempt,
            detail=TimeoutType.TIMEOUT_TYPE_HEARTBEAT,
        )
