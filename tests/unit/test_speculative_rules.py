"""Speculative workflow tasks: a task scheduled only to carry an update leaves no trace if the update is rejected."""

from __future__ import annotations

from google.protobuf import any_pb2
from temporalio.api.failure.v1 import Failure
from temporalio.api.protocol.v1 import Message
from temporalio.api.update.v1 import Acceptance, Input, Meta, Rejection, Request
from temporalio.api.workflowservice.v1 import RespondWorkflowTaskCompletedRequest

from engine.history import completion, updates
from tests.unit.history_harness import Run, types


def request(update_id: str) -> Request:
    return Request(meta=Meta(update_id=update_id), input=Input(name="u"))


def message(update_id: str, body) -> Message:
    packed = any_pb2.Any()
    packed.Pack(body)
    return Message(id=f"{update_id}/answer", protocol_instance_id=update_id, body=packed)


def answer(run: Run, now: float, *messages: Message) -> completion.Completed:
    scheduled, started, attempt = run.wft_token()
    return run.apply(
        now,
        completion.complete,
        scheduled_event_id=scheduled,
        started_event_id=started,
        attempt=attempt,
        request=RespondWorkflowTaskCompletedRequest(messages=list(messages), identity="w"),
    )


def idle_run() -> Run:
    run = Run()
    run.run_wft(1)
    assert run.state.workflow_task is None
    return run


def test_a_rejected_update_leaves_no_events():
    run = idle_run()
    before = list(run.history)
    run.apply(2, updates.admit, request=request("u1"))
    assert run.history == before  # nothing written when it is scheduled
    run.start_wft(3)
    assert run.history == before  # nor when it starts: the poller sees the events as transient ones
    done = answer(run, 4, message("u1", Rejection(failure=Failure(message="no"))))
    assert run.history == before
    assert done.reset_history_event_id == run.state.last_completed_wft_started_event_id == 3
    assert run.state.workflow_task is None
    assert run.state.updates["u1"].stage == updates.COMPLETED
    # No event, but its caller waits on the run's new events: the change wakes it all the same.
    assert run.last.update_settled_without_event


def test_a_rejecting_mutation_wakes_the_runs_waiters():
    """The update's caller waits on the run's key: a rejection in a speculative task, which writes no
    event, woke it only at its 5 s recheck (a rejected update took 5 s; 10 ms on the real server)."""
    from engine import notify
    from engine.models import Execution
    from engine.persistence import store

    run = idle_run()
    run.apply(2, updates.admit, request=request("u1"))
    run.start_wft(3)
    answer(run, 4, message("u1", Rejection(failure=Failure(message="no"))))
    execution = Execution(pk=41, shard=3, namespace_id="7d1c2b5e-3f1a-4c6e-9a51-2f0e8d3b6a10")
    assert notify.run_key(41) in store._wake_ups(execution, run.last)
    run.apply(5, updates.admit, request=request("u2"))  # scheduled, nothing written
    assert notify.run_key(41) not in store._wake_ups(execution, run.last)


def test_an_accepted_update_writes_the_task_first():
    run = idle_run()
    run.apply(2, updates.admit, request=request("u1"))
    run.start_wft(3)
    done = answer(run, 4, message("u1", Acceptance(accepted_request_message_id="u1/request")))
    assert done.reset_history_event_id == 0
    assert types(run.history[4:]) == [
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "WORKFLOW_EXECUTION_UPDATE_ACCEPTED",
    ]
    assert run.event(7).workflow_task_completed_event_attributes.started_event_id == 6


def test_a_signal_before_it_starts_makes_it_a_normal_task():
    run = idle_run()
    run.apply(2, updates.admit, request=request("u1"))
    run.signal(2.5)
    run.start_wft(3)
    assert types(run.history[4:]) == [
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
    ]
    answer(run, 4, message("u1", Rejection(failure=Failure(message="no"))))
    assert types(run.history)[-1] == "WORKFLOW_TASK_COMPLETED"


def test_a_signal_while_it_runs_keeps_it():
    run = idle_run()
    run.apply(2, updates.admit, request=request("u1"))
    run.start_wft(3)
    run.signal(3.5)  # buffered: the worker has not seen it
    done = answer(run, 4, message("u1", Rejection(failure=Failure(message="no"))))
    assert done.reset_history_event_id == 0
    assert types(run.history[4:]) == [
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_TASK_SCHEDULED",
    ]


def test_a_timed_out_speculative_task_is_written_like_a_first_attempt():
    run = idle_run()
    run.apply(2, updates.admit, request=request("u1"))
    run.start_wft(3)
    run.timeout_wft(20)
    assert types(run.history[4:]) == [
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_TIMED_OUT",
    ]
    # The retry is an ordinary transient attempt that still carries the update.
    assert run.state.workflow_task.attempt == 2
    assert not run.state.workflow_task.speculative


def test_an_update_admitted_while_a_task_runs_rides_a_speculative_task():
    # The update reaches a run whose (normal) task is in flight: the task that then carries it alone is
    # speculative, as in Temporal, and leaves nothing behind when the worker rejects the update.
    run = idle_run()
    run.signal(2)
    run.start_wft(3)
    run.apply(3.5, updates.admit, request=request("u1"))
    assert run.state.workflow_task.started_event_id  # admitting it changed nothing for the running task
    run.complete_wft(4)
    before = list(run.history)
    assert types(before)[-1] == "WORKFLOW_TASK_COMPLETED"
    assert run.state.workflow_task.speculative
    run.start_wft(5)
    done = answer(run, 6, message("u1", Rejection(failure=Failure(message="no"))))
    assert run.history == before
    assert done.reset_history_event_id == run.state.last_completed_wft_started_event_id
    assert run.state.workflow_task is None


def test_an_update_admitted_while_a_task_runs_waits_behind_events_of_that_task():
    # A signal that came in too makes the next task a normal one: it must deliver the signal.
    run = idle_run()
    run.signal(2)
    run.start_wft(3)
    run.apply(3.5, updates.admit, request=request("u1"))
    run.signal(3.6)
    run.complete_wft(4)
    assert not run.state.workflow_task.speculative
    assert types(run.history)[-2:] == ["WORKFLOW_EXECUTION_SIGNALED", "WORKFLOW_TASK_SCHEDULED"]
