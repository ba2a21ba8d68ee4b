"""The mutable state survives state.dump/state.load at any point: a stored run resumes exactly where it was."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import TimeoutType

from engine.history import lifecycle, state
from tests.unit.history_harness import (
    CountingIds,
    Run,
    app_failure,
    complete_workflow,
    payloads,
    schedule_activity,
    start_request,
    start_timer,
)


def full_scenario(run: Run, checkpoint) -> None:
    """Activities and retries, a timer, signals and results buffered while tasks run, a transient task."""
    run.start_wft(0.1)
    checkpoint(run)
    run.signal(0.2, "early", request_id="r1")
    checkpoint(run)
    run.complete_wft(
        0.5,
        schedule_activity("a", start_to_close=5, heartbeat=2),
        start_timer("t", 3),
        schedule_activity("b", start_to_close=5),
    )  # 4 WTCompleted, 5 ATScheduled a, 6 TimerStarted, 7 ATScheduled b, 8 Signaled, 9 WTScheduled
    checkpoint(run)
    run.start_activity(1, 5)
    run.heartbeat(1.5, 5, payloads("hb"))
    checkpoint(run)
    run.fail_activity(2, 5, app_failure("flaky"))  # retried in 1 s, no event
    checkpoint(run)
    run.start_wft(2.1)  # in flight while the next inputs arrive
    run.start_activity(3, 5)
    run.complete_activity(3.5, 5)  # buffered, started id re-wired at flush
    run.fire_timer(3.6, "t")  # buffered
    run.signal(3.7, "dup", request_id="r1")  # deduplicated
    checkpoint(run)
    run.fail_wft(4)  # attempt 1 failed; buffered events flushed; next task is a normal attempt 1
    checkpoint(run)
    run.start_wft(4.1)
    run.timeout_wft(14.1)  # attempt 1 timed out: a transient attempt 2
    checkpoint(run)
    run.start_wft(15)
    checkpoint(run)
    run.start_activity(15.5, 7)
    run.timeout_activity(20.5, 7, TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE)  # retried, no event
    checkpoint(run)
    run.complete_wft(21, complete_workflow())  # transient events written, then the close


def _no_checkpoint(run: Run) -> None:
    pass


def _assert_roundtrip(run: Run) -> None:
    data = state.dump(run.state)
    assert state.load(data) == run.state
    assert state.dump(state.load(data)) == data


def _restore(run: Run) -> None:
    """Replace the live state with its stored form, as a restart of the server would."""
    run.state = state.load(state.dump(run.state))


@pytest.mark.parametrize("checkpoint", [_assert_roundtrip, _restore], ids=["dump-load-equal", "restore"])
def test_state_survives_dump_and_load_at_every_step(checkpoint):
    stored = Run(start_request(run_timeout=600), roundtrip=True)
    live = Run(start_request(run_timeout=600), roundtrip=False)

    full_scenario(stored, checkpoint)
    full_scenario(live, _no_checkpoint)

    assert [e.SerializeToString() for e in stored.history] == [e.SerializeToString() for e in live.history]
    assert state.dump(stored.state) == state.dump(live.state)
    assert [(s.tasks, s.timers) for s in stored.steps] == [(s.tasks, s.timers) for s in live.steps]
    assert stored.types()[-3:] == [
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "WORKFLOW_EXECUTION_COMPLETED",
    ]
    ids = [e.event_id for e in stored.history]
    assert ids == list(range(1, len(ids) + 1))


def test_full_scenario_history():
    run = Run(start_request(run_timeout=600))
    full_scenario(run, _no_checkpoint)

    assert run.types() == [
        "WORKFLOW_EXECUTION_STARTED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "ACTIVITY_TASK_SCHEDULED",
        "TIMER_STARTED",
        "ACTIVITY_TASK_SCHEDULED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_FAILED",
        "ACTIVITY_TASK_STARTED",
        "TIMER_FIRED",  # buffered activity results are written last, as Temporal does
        "ACTIVITY_TASK_COMPLETED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_TIMED_OUT",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "WORKFLOW_EXECUTION_COMPLETED",
    ]
    started, completed = run.event(12), run.event(14)
    assert started.activity_task_started_event_attributes.attempt == 2
    assert started.activity_task_started_event_attributes.last_failure.message == "flaky"
    assert completed.activity_task_completed_event_attributes.started_event_id == 12
    assert run.event(15).workflow_task_scheduled_event_attributes.attempt == 1
    assert run.event(18).workflow_task_scheduled_event_attributes.attempt == 2
    assert run.types().count("WORKFLOW_EXECUTION_SIGNALED") == 1


def test_lifecycle_start_state_is_storable_before_any_step():
    m = lifecycle.start(
        namespace_id="ns",
        namespace="default",
        run_id="r",
        request=start_request(execution_timeout=60),
        now=Run().steps[0].now,
        ids=CountingIds(),
    )
    assert state.load(state.dump(m.state)) == m.state
