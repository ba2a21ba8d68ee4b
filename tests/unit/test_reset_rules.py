"""Reset rules: rebuilding a run's state from its history, and the new run a reset writes."""

from __future__ import annotations

import pytest
from temporalio.api.command.v1 import Command, UpsertWorkflowSearchAttributesCommandAttributes
from temporalio.api.common.v1 import Payload, SearchAttributes
from temporalio.api.enums.v1 import (
    CommandType,
    EventType,
    ResetReapplyExcludeType,
    ResetReapplyType,
    TaskQueueKind,
    WorkflowTaskFailedCause,
)
from temporalio.api.history.v1 import HistoryEvent, WorkflowExecutionUpdateAcceptedEventAttributes
from temporalio.api.update.v1 import Input, Meta, Request

from engine.history import rebuild, reset, updates
from engine.history.errors import ResetRejected
from engine.history.events import new_event
from engine.history.mutation import TaskKind, TimerKind
from tests.unit.history_harness import (
    NAMESPACE_ID,
    CountingIds,
    Run,
    at,
    payloads,
    schedule_activity,
    start_request,
    start_timer,
    types,
)

NEW_RUN = "0195a2b0-0000-7000-8000-00000000000b"


def upsert(key: str, value: bytes) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
        upsert_workflow_search_attributes_command_attributes=UpsertWorkflowSearchAttributesCommandAttributes(
            search_attributes=SearchAttributes(indexed_fields={key: Payload(data=value)})
        ),
    )


def busy_run() -> Run:
    """Two activities and two timers from the first task; one of each finishes; a signal; a third task in flight."""
    run = Run(start_request(run_timeout=3600))
    run.run_wft(
        1,
        schedule_activity("a", start_to_close=10),
        schedule_activity("b", start_to_close=10),
        start_timer("t1", 5),
        start_timer("t2", 60),
        upsert("CustomKeyword", b'"x"'),
    )
    run.start_activity(2, 5)
    run.complete_activity(3, 5)
    run.fire_timer(6, "t1")
    run.signal(7, request_id="sig-1", value="v")
    run.start_wft(9)
    return run


def test_rebuild_gives_the_state_the_live_rules_built():
    run = busy_run()
    live = run.state
    rebuilt = rebuild.rebuild(
        run.history, namespace_id=NAMESPACE_ID, namespace="default", run_id=NEW_RUN, now=at(100)
    )
    assert rebuilt.next_event_id == live.next_event_id
    assert rebuilt.history_size == live.history_size
    assert rebuilt.last_completed_wft_started_event_id == live.last_completed_wft_started_event_id
    assert {k: v.activity_id for k, v in rebuilt.activities.items()} == {
        k: v.activity_id for k, v in live.activities.items()
    }
    assert rebuilt.activities.keys() == {6}
    assert rebuilt.activities[6].scheduled == live.activities[6].scheduled
    assert {k: (v.started_event_id, v.fire_at) for k, v in rebuilt.timers.items()} == {
        k: (v.started_event_id, v.fire_at) for k, v in live.timers.items()
    }
    assert rebuilt.signal_request_ids == live.signal_request_ids == ["sig-1"]
    assert rebuilt.search_attributes == live.search_attributes
    wft, live_wft = rebuilt.workflow_task, live.workflow_task
    assert (wft.scheduled_event_id, wft.started_event_id) == (
        live_wft.scheduled_event_id,
        live_wft.started_event_id,
    )
    # Countdowns restart with the new run.
    assert rebuilt.start_time == at(100)
    assert rebuilt.run_expiration == at(3700)


def test_reset_run_fails_the_task_reapplies_and_takes_over_pending_work():
    run = busy_run()
    run.complete_wft(10)
    # Reset to the end of the task started at 9: activity "b" and timer "t2" are pending there.
    completed = [e for e in run.history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]
    point = completed[-1].event_id
    run.signal(11, request_id="sig-2", value="later")
    request = Request(meta=Meta(update_id="u-1"), input=Input(name="push", args=payloads("u")))
    later = [
        *[e for e in run.history if e.event_id >= point + 1],
        new_event(
            WorkflowExecutionUpdateAcceptedEventAttributes(
                protocol_instance_id="u-1", accepted_request=request
            )
        ),
    ]
    m = reset.reset_run(
        base_events=run.history[: point - 1],
        later_events=later,
        finish_event_id=point,
        namespace_id=NAMESPACE_ID,
        namespace="default",
        base_run_id=run.state.run_id,
        new_run_id=NEW_RUN,
        reason="bad deploy",
        request_id="reset-1",
        excluded=set(),
        ids=CountingIds(),
        now=at(100),
    )
    assert m.events[: point - 1] == run.history[: point - 1]
    assert types(m.events[point - 1 :]) == [
        "WORKFLOW_TASK_FAILED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_EXECUTION_UPDATE_ADMITTED",
        "WORKFLOW_TASK_SCHEDULED",
    ]
    failed = m.events[point - 1].workflow_task_failed_event_attributes
    assert failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
    assert (failed.base_run_id, failed.new_run_id, failed.failure.message) == (
        run.state.run_id,
        NEW_RUN,
        "bad deploy",
    )
    assert m.events[point].workflow_execution_signaled_event_attributes.request_id == "sig-2"
    assert (
        m.events[-1].workflow_task_scheduled_event_attributes.task_queue.kind
        == TaskQueueKind.TASK_QUEUE_KIND_NORMAL
    )
    state = m.state
    assert state.signal_request_ids == ["sig-1", "sig-2"]
    assert state.updates["u-1"].stage == updates.ADMITTED
    assert state.updates["u-1"].admitted_event_id
    # An admitted-by-event update is read from history by the worker: no protocol message for it.
    assert updates.messages(state, started_event_id=state.next_event_id) == []
    assert (state.start_request_id, state.run_id, state.sticky_queue) == ("reset-1", NEW_RUN, "")
    assert {(t.kind, t.scheduled_event_id) for t in m.tasks} == {
        (TaskKind.ACTIVITY, 6),
        (TaskKind.WORKFLOW, state.next_event_id - 1),
    }
    timers = {(t.kind, t.event_id) for t in m.timers}
    assert (TimerKind.USER_TIMER, state.timers["t2"].started_event_id) in timers
    assert (TimerKind.WORKFLOW_RUN_TIMEOUT, 0) in timers


def test_reset_excluding_signals_and_updates_reapplies_nothing():
    run = busy_run()
    run.complete_wft(10)
    run.signal(11, request_id="sig-2", value="later")
    m = reset.reset_run(
        base_events=run.history[:3],
        later_events=run.history[4:],
        finish_event_id=4,
        namespace_id=NAMESPACE_ID,
        namespace="default",
        base_run_id=run.state.run_id,
        new_run_id=NEW_RUN,
        reason="r",
        request_id="reset-2",
        excluded=reset.exclusions(ResetReapplyType.RESET_REAPPLY_TYPE_NONE, []),
        ids=CountingIds(),
        now=at(100),
    )
    assert types(m.events[3:]) == ["WORKFLOW_TASK_FAILED", "WORKFLOW_TASK_SCHEDULED"]
    assert not m.state.activities
    assert not m.state.timers


def test_exclusions_fold_in_the_deprecated_reapply_type():
    signal = ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL
    update = ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE
    assert reset.exclusions(ResetReapplyType.RESET_REAPPLY_TYPE_UNSPECIFIED, []) == set()
    assert reset.exclusions(ResetReapplyType.RESET_REAPPLY_TYPE_SIGNAL, []) == {update}
    assert reset.exclusions(ResetReapplyType.RESET_REAPPLY_TYPE_NONE, []) == {signal, update}
    assert reset.exclusions(ResetReapplyType.RESET_REAPPLY_TYPE_ALL_ELIGIBLE, [signal]) == {signal}


@pytest.mark.parametrize("finish", [0, 1, 12])
def test_point_out_of_range(finish):
    with pytest.raises(ResetRejected, match="finish ID must be > 1"):
        reset.check_point(finish, next_event_id=12)


def test_point_must_end_a_workflow_task():
    run = busy_run()
    with pytest.raises(ResetRejected, match="Can only reset workflow to event ID"):
        # Event 5 is ActivityTaskScheduled: events 1-4 end with the first task completed.
        reset.reset_run(
            base_events=run.history[:4],
            later_events=[],
            finish_event_id=5,
            namespace_id=NAMESPACE_ID,
            namespace="default",
            base_run_id=run.state.run_id,
            new_run_id=NEW_RUN,
            reason="r",
            request_id="x",
            excluded=set(),
            ids=CountingIds(),
            now=at(100),
        )


def test_rebuild_needs_the_start_event():
    with pytest.raises(ResetRejected):
        rebuild.rebuild(
            [HistoryEvent(event_id=2)], namespace_id=NAMESPACE_ID, namespace="d", run_id=NEW_RUN, now=at(0)
        )
