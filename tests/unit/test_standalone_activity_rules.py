"""Standalone activity rules: start (with a start delay), outcomes that close the host run, cancel,
terminate, the describe view, and filters kept to their own division of the runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.api.command.v1 import Command
from temporalio.api.enums.v1 import (
    ActivityExecutionStatus,
    CommandType,
    EventType,
    PendingActivityState,
    TimeoutType,
    WorkflowExecutionStatus,
)
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure
from temporalio.api.workflowservice.v1 import StartActivityExecutionRequest

from engine.errors import FailedPrecondition, InvalidArgument
from engine.history import activity, standalone
from engine.history.mutation import Mutation, TaskKind
from engine.history.state import MutableState
from tests.unit.history_harness import CountingIds, Run, at, dur, payloads, start_request
from visibility.divisions import ACTIVITY_PREFIX, activity_host_id
from visibility.query import ast
from visibility.query.divisions import restrict
from visibility.query.memory import matches
from visibility.query.parser import parse
from visibility.query.resolve import resolve

A = ActivityExecutionStatus
W = WorkflowExecutionStatus


def request(*, start_to_close: float = 10, schedule_to_close: float = 0, delay: float = 0, **extra):
    r = StartActivityExecutionRequest(
        namespace="default", activity_id="job-1", request_id="req-1", identity="client", **extra
    )
    r.activity_type.name = "charge"
    r.task_queue.name = "jobs"
    if start_to_close:
        r.start_to_close_timeout.CopyFrom(dur(start_to_close))
    if schedule_to_close:
        r.schedule_to_close_timeout.CopyFrom(dur(schedule_to_close))
    if delay:
        r.start_delay.CopyFrom(dur(delay))
    r.input.CopyFrom(payloads("42"))
    return r


class Host:
    """A host run applied step by step, as the write path would (the state carried over, the mutation fresh)."""

    def __init__(self, req: StartActivityExecutionRequest, now: float = 0) -> None:
        self.first = standalone.start(
            namespace_id="ns",
            namespace="default",
            run_id="run-1",
            request=req,
            now=at(now),
            ids=CountingIds(),
        )
        self.state: MutableState = self.first.state
        self.sid = self.state.standalone.scheduled_event_id  # type: ignore[union-attr]
        self.last = self.first

    def apply(self, now: float, fn, /, **kwargs):
        self.last = Mutation(self.state, at(now), CountingIds())
        return fn(self.last, **kwargs)

    def start_attempt(self, now: float):
        info = self.state.activities[self.sid]
        return self.apply(
            now,
            activity.start,
            scheduled_event_id=self.sid,
            attempt=info.attempt,
            identity="worker",
            request_id="poll",
            task_queue="jobs",
            visible_at=info.task_visible_at or info.attempt_scheduled_time,
        )

    def describe(self):
        return standalone.describe(self.state, include_heartbeat_details=True, include_last_failure=True)


def test_start_hosts_one_scheduled_activity_under_the_prefixed_id():
    host = Host(request())
    state = host.state
    assert state.workflow_id == ACTIVITY_PREFIX + "job-1" == activity_host_id("job-1")
    assert state.workflow_type == "charge"
    assert state.workflow_task is None
    assert [t.kind for t in host.first.tasks] == [TaskKind.ACTIVITY]
    assert host.first.tasks[0].visible_at == at(0)
    view = host.describe()
    assert (view.activity_id, view.status, view.run_state, view.attempt) == (
        "job-1",
        A.ACTIVITY_EXECUTION_STATUS_RUNNING,
        PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED,
        1,
    )
    assert view.retry_policy.backoff_coefficient == 2.0  # the default policy, filled in
    assert not view.HasField("expiration_time")  # no schedule-to-close timeout
    assert not view.HasField("current_retry_interval")


def test_a_start_delay_holds_the_first_task_and_its_timeouts():
    host = Host(request(start_to_close=0, schedule_to_close=60, delay=5))
    assert [t.visible_at for t in host.first.tasks] == [at(5)]
    s2c = [t for t in host.first.timers if t.detail == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE]
    assert [t.fire_at for t in s2c] == [at(65)]  # from the first dispatch, as Temporal counts it
    view = host.describe()
    assert view.schedule_time.ToDatetime(tzinfo=at(0).tzinfo) == at(0)
    assert view.execution_time.ToDatetime(tzinfo=at(0).tzinfo) == at(5)
    assert view.start_delay.ToTimedelta() == timedelta(seconds=5)
    host.start_attempt(5)  # the delayed task row is the attempt's, not a stale one
    assert host.describe().run_state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"start_to_close": 0}, "a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set"),
        ({"delay": -1}, "invalid StartDelay"),
    ],
)
def test_bad_starts_are_refused(change, message):
    with pytest.raises(InvalidArgument, match=message):
        Host(request(**change))


def test_completion_closes_the_run_with_the_result_as_outcome():
    host = Host(request())
    host.start_attempt(1)
    host.apply(
        2, activity.complete, scheduled_event_id=host.sid, attempt=1, result=payloads("43"), identity="w"
    )
    assert host.last.closed
    assert host.last.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    assert host.state.status == W.WORKFLOW_EXECUTION_STATUS_COMPLETED
    assert standalone.outcome(host.state).result == payloads("43")
    view = host.describe()
    assert view.status == A.ACTIVITY_EXECUTION_STATUS_COMPLETED
    assert view.run_state == PendingActivityState.PENDING_ACTIVITY_STATE_UNSPECIFIED
    assert view.execution_duration.ToTimedelta() == timedelta(seconds=2)
    assert view.last_started_time.ToDatetime(tzinfo=at(0).tzinfo) == at(1)


def test_a_failed_attempt_retries_without_closing_then_a_non_retryable_failure_fails_it():
    host = Host(request())
    host.start_attempt(1)
    failure = Failure(message="flaky", application_failure_info=ApplicationFailureInfo(type="Flaky"))
    host.apply(
        2,
        activity.fail,
        scheduled_event_id=host.sid,
        attempt=1,
        failure=failure,
        identity="w",
        last_heartbeat_details=None,
    )
    assert host.state.running
    view = host.describe()
    assert (view.attempt, view.last_failure.message) == (2, "flaky")
    assert view.next_attempt_schedule_time.ToDatetime(tzinfo=at(0).tzinfo) == at(3)  # 1 s initial interval
    assert view.current_retry_interval.ToTimedelta() == timedelta(seconds=1)
    host.start_attempt(3)
    final = Failure(message="bad card", application_failure_info=ApplicationFailureInfo(non_retryable=True))
    host.apply(
        4,
        activity.fail,
        scheduled_event_id=host.sid,
        attempt=2,
        failure=final,
        identity="w",
        last_heartbeat_details=None,
    )
    assert host.state.status == W.WORKFLOW_EXECUTION_STATUS_FAILED
    assert standalone.outcome(host.state).failure.message == "bad card"
    assert host.describe().status == A.ACTIVITY_EXECUTION_STATUS_FAILED


def test_a_timeout_without_retries_left_times_the_activity_out():
    host = Host(request(start_to_close=0, schedule_to_close=5))
    host.apply(
        5,
        activity.time_out,
        scheduled_event_id=host.sid,
        attempt=0,
        timeout_type=TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE,
    )
    assert host.state.status == W.WORKFLOW_EXECUTION_STATUS_TIMED_OUT
    outcome = standalone.outcome(host.state).failure
    assert outcome.timeout_failure_info.timeout_type in (
        TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START,
        TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE,
    )
    assert host.describe().status == A.ACTIVITY_EXECUTION_STATUS_TIMED_OUT


def test_cancel_of_a_scheduled_activity_cancels_it_at_once_with_the_reason():
    host = Host(request())
    host.apply(1, standalone.request_cancel, reason="not needed", identity="ops", request_id="c-1")
    assert host.state.status == W.WORKFLOW_EXECUTION_STATUS_CANCELED
    failure = standalone.outcome(host.state).failure
    assert failure.message == "Activity canceled"
    assert failure.canceled_failure_info.details == payloads("not needed")
    assert host.describe().canceled_reason == "not needed"
    host.apply(
        2, standalone.request_cancel, reason="again", identity="ops", request_id="c-1"
    )  # a retry: no-op
    with pytest.raises(FailedPrecondition, match="activity is in terminal state Canceled"):
        host.apply(2, standalone.request_cancel, reason="again", identity="ops", request_id="c-2")


def test_cancel_of_a_running_attempt_waits_for_the_worker():
    host = Host(request())
    host.start_attempt(1)
    host.apply(2, standalone.request_cancel, reason="stop", identity="ops", request_id="c-1")
    assert host.state.running
    assert host.describe().run_state == PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
    answer = host.apply(3, activity.heartbeat, scheduled_event_id=host.sid, attempt=1, details=None)
    assert answer.cancel_requested
    with pytest.raises(FailedPrecondition, match="cancellation already requested with request ID c-1"):
        host.apply(3, standalone.request_cancel, reason="stop", identity="ops", request_id="c-2")
    host.apply(
        4, activity.canceled, scheduled_event_id=host.sid, attempt=1, details=payloads("bye"), identity="w"
    )
    assert host.state.status == W.WORKFLOW_EXECUTION_STATUS_CANCELED
    assert standalone.outcome(host.state).failure.canceled_failure_info.identity == "ops"


def test_a_worker_cannot_report_cancellation_nobody_asked_for():
    host = Host(request())
    host.start_attempt(1)
    with pytest.raises(FailedPrecondition, match="invalid transition from Started"):
        host.apply(2, activity.canceled, scheduled_event_id=host.sid, attempt=1, details=None, identity="w")


def test_terminate_closes_it_and_a_repeat_is_refused_unless_the_same_request():
    host = Host(request())
    host.start_attempt(1)
    host.apply(2, standalone.terminate, reason="stop it", identity="ops", request_id="t-1")
    assert host.last.closed
    assert host.state.status == W.WORKFLOW_EXECUTION_STATUS_TERMINATED
    failure = standalone.outcome(host.state).failure
    assert (failure.message, failure.terminated_failure_info.identity) == ("stop it", "ops")
    assert host.describe().attempt == 1
    host.apply(3, standalone.terminate, reason="stop it", identity="ops", request_id="t-1")
    with pytest.raises(FailedPrecondition, match="already terminated with request ID t-1"):
        host.apply(3, standalone.terminate, reason="again", identity="ops", request_id="t-2")


# --- filters kept to their own division --------------------------------------------------------------


def _record(workflow_id: str, workflow_type: str = "charge") -> dict[str, object]:
    return {"WorkflowId": workflow_id, "WorkflowType": workflow_type, "ExecutionStatus": 1}


def _matches(text: str, record: dict[str, object], *, activities: bool) -> bool:
    return matches(resolve(restrict(parse(text), activities=activities), {}, count=False), record)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ActivityId = 'job-1'",
        "ActivityId IN ('x', 'job-1')",
        "ActivityId STARTS_WITH 'job'",
        "ActivityType = 'charge'",
    ],
)
def test_activity_filters_see_activities_only(text):
    assert _matches(text, _record(activity_host_id("job-1")), activities=True)
    assert not _matches(text, _record("job-1"), activities=True)


@pytest.mark.parametrize(
    "text", ["", "WorkflowId = 'job-1'", "WorkflowType = 'charge'", "ExecutionStatus = 'Running'"]
)
def test_workflow_filters_never_see_activities(text):
    assert _matches(text, _record("job-1"), activities=False)
    assert not _matches(
        text.replace("'job-1'", f"'{activity_host_id('job-1')}'"),
        _record(activity_host_id("job-1")),
        activities=False,
    )


def test_an_activity_filter_keeps_its_shape():
    restricted = restrict(parse("ActivityId != 'a' GROUP BY ExecutionStatus"), activities=True)
    assert restricted.group_by == (ast.Attr("ExecutionStatus", restricted.group_by[0].position),)
    assert isinstance(restricted.where, ast.And)
    first = restricted.where.items[0]
    assert isinstance(first, ast.Compare)
    assert (first.attr.name, first.op, first.value) == ("WorkflowId", "!=", ACTIVITY_PREFIX + "a")


# --- workflows cannot reach the host runs ------------------------------------------------------------


@pytest.mark.parametrize(
    ("command_type", "field", "set_id"),
    [
        (
            "START_CHILD_WORKFLOW_EXECUTION",
            "start_child_workflow_execution_command_attributes",
            "workflow_id",
        ),
        (
            "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION",
            "signal_external_workflow_execution_command_attributes",
            "execution.workflow_id",
        ),
        (
            "REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION",
            "request_cancel_external_workflow_execution_command_attributes",
            "workflow_id",
        ),
    ],
)
def test_a_workflow_command_naming_a_host_run_fails_its_task(command_type, field, set_id):
    command = Command(command_type=CommandType.Value(f"COMMAND_TYPE_{command_type}"))
    attrs = getattr(command, field)
    target = attrs
    *path, last = set_id.split(".")
    for name in path:
        target = getattr(target, name)
    setattr(target, last, activity_host_id("job-1"))
    if command_type == "START_CHILD_WORKFLOW_EXECUTION":
        attrs.workflow_type.name = "Child"
        attrs.task_queue.name = "jobs"
    if command_type == "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION":
        attrs.signal_name = "poke"
    run = Run(start_request())
    failure = run.run_wft(1, command)
    assert failure is not None
    assert "may not begin with the control character U+001F" in failure.message


def test_an_attempt_start_wakes_the_describe_long_polls():
    """A worker taking the attempt writes no event, yet it is the change a Describe with a long poll token
    waits for: the commit wakes the host run's waiters (it woke them only at their 5 s recheck)."""
    from engine import notify
    from engine.models import Execution
    from engine.persistence import store

    host = Host(request())
    host.start_attempt(1)
    assert host.last.events == []
    execution = Execution(pk=8, shard=2, namespace_id="7d1c2b5e-3f1a-4c6e-9a51-2f0e8d3b6a10")
    assert notify.run_key(8) in store._wake_ups(execution, host.last)
