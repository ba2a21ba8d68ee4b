"""Park-and-redrive: an activity whose retries are exhausted is parked (paused, PerduraParked set), not
failed, when its header or its namespace says so; a reset or an unpause with reset attempts redrives it."""

from __future__ import annotations

import json

import pytest
from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.common.v1 import Header, Payload, RetryPolicy, SearchAttributes
from temporalio.api.enums.v1 import RetryState, TimeoutType, WorkflowTaskFailedCause

from engine.history import activity, activity_control, lifecycle, parking
from engine.history.activity_control import Target
from engine.history.mutation import Mutation, TaskKind
from tests.unit.history_harness import (
    Run,
    app_failure,
    dur,
    request_cancel_activity,
    schedule_activity,
    start_request,
)

SID = 5


def _json(value: object) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


def _scheduled(choice: object | None, *, activity_type: str = "charge", maximum_attempts: int = 3) -> Run:
    run = Run(start_request())
    command = schedule_activity(
        "1",
        activity_type=activity_type,
        start_to_close=30,
        retry_policy=RetryPolicy(maximum_attempts=maximum_attempts, initial_interval=dur(1)),
    )
    if choice is not None:
        command.schedule_activity_task_command_attributes.header.CopyFrom(
            Header(fields={parking.HEADER: _json(choice)})
        )
    assert run.run_wft(0.1, command) is None
    return run


def _attempt_and_fail(run: Run, now: float, *, namespace_parks: bool = False, failure=None) -> None:
    run.start_activity(now, SID)

    def fail(m: Mutation, **kwargs) -> None:
        m.park_on_exhausted = namespace_parks
        activity.fail(m, **kwargs)

    run.apply(
        now + 0.5,
        fail,
        scheduled_event_id=SID,
        attempt=run.activity_attempt(SID),
        failure=failure or app_failure("card declined"),
        identity="act-worker",
        last_heartbeat_details=None,
    )


def _exhaust(run: Run, attempts: int = 3, *, namespace_parks: bool = False) -> None:
    for n in range(attempts):
        _attempt_and_fail(run, 10.0 * (n + 1), namespace_parks=namespace_parks)


def _parked_types(run: Run) -> list[str] | None:
    if not run.state.search_attributes:
        return None
    payload = SearchAttributes.FromString(run.state.search_attributes).indexed_fields.get(parking.ATTRIBUTE)
    return None if payload is None else json.loads(payload.data)


def _pause_info(run: Run) -> list[str] | None:
    if not run.state.search_attributes:
        return None
    payload = SearchAttributes.FromString(run.state.search_attributes).indexed_fields.get("TemporalPauseInfo")
    return None if payload is None else json.loads(payload.data)


def test_exhausted_retries_park_the_activity_with_the_header():
    run = _scheduled("park")
    _exhaust(run)
    info = run.state.activities[SID]
    assert parking.is_parked(info)
    assert info.paused
    assert info.attempt == 4  # the next attempt waits, undispatched, as a paused activity's does
    assert info.pause_reason.startswith(
        "parked after 3 attempts, retries exhausted (last failure: card declined)"
    )
    assert not run.new_events  # no event, no attempt dispatched
    assert not run.new_tasks
    assert not run.new_timers  # no timeout runs while parked
    assert run.state.running
    assert _parked_types(run) == ["charge"]
    assert _pause_info(run) == ["property:activityType=charge"]
    assert run.last.search_attributes_changed  # visibility is written again: no event tells it


def test_without_park_the_activity_fails_as_in_temporal():
    run = _scheduled(None)
    _exhaust(run)
    assert SID not in run.state.activities
    assert any(
        e.activity_task_failed_event_attributes.retry_state == RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
        for e in run.new_events
    )
    assert _parked_types(run) is None


def test_the_namespace_default_parks_and_the_header_overrides_it_both_ways():
    run = _scheduled(None)
    _exhaust(run, namespace_parks=True)
    assert parking.is_parked(run.state.activities[SID])
    run = _scheduled("fail")
    _exhaust(run, namespace_parks=True)
    assert SID not in run.state.activities


def test_a_non_retryable_failure_is_not_parked():
    run = _scheduled("park")
    failure = app_failure("bad input")
    failure.application_failure_info.non_retryable = True
    _attempt_and_fail(run, 1, failure=failure)
    assert SID not in run.state.activities
    assert _parked_types(run) is None


def test_retries_left_are_spent_before_parking():
    run = _scheduled("park")
    _exhaust(run, attempts=2)
    info = run.state.activities[SID]
    assert not info.paused
    assert info.attempt == 3


def test_reset_redrives_with_fresh_attempts_and_clears_the_attribute():
    run = _scheduled("park")
    _exhaust(run)
    run.apply(40, activity_control.reset, target=Target(match_all=True))
    info = run.state.activities[SID]
    assert not info.paused
    assert info.attempt == 1
    assert [(t.kind, t.attempt) for t in run.new_tasks] == [(TaskKind.ACTIVITY, 1)]
    assert _parked_types(run) is None
    assert _pause_info(run) is None
    assert run.last.search_attributes_changed
    # fresh attempts: it fails twice more before it parks again
    _attempt_and_fail(run, 50)
    _attempt_and_fail(run, 60)
    assert not run.state.activities[SID].paused
    _attempt_and_fail(run, 70)
    assert parking.is_parked(run.state.activities[SID])


def test_unpause_with_reset_attempts_redrives_by_type():
    run = _scheduled("park", activity_type="ship")
    _exhaust(run)
    run.apply(40, activity_control.unpause, target=Target(activity_type="ship"), reset_attempts=True)
    assert run.state.activities[SID].attempt == 1
    assert not run.state.activities[SID].paused
    assert _parked_types(run) is None


def test_a_plain_unpause_allows_one_more_attempt_then_parks_again():
    run = _scheduled("park")
    _exhaust(run)
    run.apply(40, activity_control.unpause, target=Target(activity_id="1"))
    assert run.state.activities[SID].attempt == 4
    _attempt_and_fail(run, 50)
    assert parking.is_parked(run.state.activities[SID])


def test_a_parked_activity_the_workflow_cancels_leaves_the_index():
    run = _scheduled("park")
    _exhaust(run)
    run.apply(
        41, lifecycle.signal, signal_name="give-up", input=None, identity="me", request_id="s", header=None
    )
    assert run.run_wft(42, request_cancel_activity(SID)) is None
    assert SID not in run.state.activities
    assert _parked_types(run) is None


def test_a_manual_pause_sets_temporal_pause_info_but_not_parked():
    run = _scheduled(None)
    run.apply(
        1, activity_control.pause, target=Target(activity_id="1"), identity="me", reason="r", request_id=""
    )
    assert _pause_info(run) == ["property:activityType=charge"]
    assert _parked_types(run) is None
    run.apply(2, activity_control.unpause, target=Target(activity_id="1"))
    assert _pause_info(run) is None


@pytest.mark.parametrize(
    "payload",
    [_json("later"), _json(True), Payload(metadata={"encoding": b"binary/plain"}, data=b"park")],
    ids=["word", "bool", "encoding"],
)
def test_an_invalid_header_fails_the_workflow_task(payload):
    run = Run(start_request())
    command = schedule_activity("1", start_to_close=30)
    command.schedule_activity_task_command_attributes.header.CopyFrom(
        Header(fields={parking.HEADER: payload})
    )
    failure = run.run_wft(0.1, command)
    assert failure is not None
    assert (
        failure.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES
    )
    assert (
        failure.message == 'the perdura-on-retries-exhausted header must be the JSON string "park" or "fail"'
    )


def test_a_schedule_to_close_timeout_is_not_parked():
    run = Run(start_request())
    command = schedule_activity(
        "1",
        start_to_close=5,
        schedule_to_close=8,
        retry_policy=RetryPolicy(maximum_attempts=0, initial_interval=dur(1)),
    )
    command.schedule_activity_task_command_attributes.header.CopyFrom(
        Header(fields={parking.HEADER: _json("park")})
    )
    assert run.run_wft(0.1, command) is None
    run.start_activity(1, SID)
    run.apply(
        9,
        activity.time_out,
        scheduled_event_id=SID,
        attempt=0,
        timeout_type=TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE,
    )
    assert SID not in run.state.activities


def test_a_start_to_close_timeout_of_the_last_attempt_parks_too():
    run = _scheduled("park", maximum_attempts=1)
    run.start_activity(1, SID)
    run.apply(
        31.5,
        activity.time_out,
        scheduled_event_id=SID,
        attempt=1,
        timeout_type=TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE,
    )
    info = run.state.activities[SID]
    assert parking.is_parked(info)
    assert info.pause_reason.startswith(
        "parked after 1 attempt, retries exhausted (last failure: activity StartToClose"
    )


def test_raising_maximum_attempts_then_unpausing_retries_under_the_new_policy():
    run = _scheduled("park")
    _exhaust(run)
    run.apply(
        40,
        activity_control.update_options,
        target=Target(activity_id="1"),
        options=ActivityOptions(retry_policy=RetryPolicy(maximum_attempts=6)),
        paths=["retry_policy.maximum_attempts"],
    )
    assert parking.is_parked(run.state.activities[SID])  # an option update does not redrive
    run.apply(41, activity_control.unpause, target=Target(activity_id="1"))
    _attempt_and_fail(run, 50)
    info = run.state.activities[SID]
    assert not info.paused
    assert info.attempt == 5
