"""Per-run limits: pending activities, history size and count, and the continue-as-new suggestion."""

from __future__ import annotations

from temporalio.api.enums.v1 import SuggestContinueAsNewReason, WorkflowTaskFailedCause

from engine.history import limits
from tests.unit.history_harness import Run, attrs_of, schedule_activity, start_timer, types


def test_pending_activity_limit_fails_the_task(monkeypatch):
    monkeypatch.setattr(limits, "PENDING_ACTIVITIES", 3)
    run = Run()
    failure = run.run_wft(1, *(schedule_activity(str(i), start_to_close=10) for i in range(4)))
    assert failure is not None
    assert (
        failure.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_PENDING_ACTIVITIES_LIMIT_EXCEEDED
    )


def test_history_over_the_count_limit_terminates_the_run(monkeypatch):
    monkeypatch.setattr(limits, "HISTORY_COUNT_LIMIT", 5)
    run = Run()
    assert run.run_wft(1, start_timer("t", 1)) is None  # events 1..5: at the limit, not over it
    run.fire_timer(2, "t")
    run.run_wft(3, start_timer("t2", 1))
    assert types(run.history)[-1] == "WORKFLOW_EXECUTION_TERMINATED"
    assert attrs_of(run.history[-1]).reason == limits.HISTORY_COUNT_EXCEEDED
    assert not run.state.running


def test_started_event_suggests_continue_as_new_past_the_threshold(monkeypatch):
    monkeypatch.setattr(limits, "HISTORY_COUNT_SUGGEST_CONTINUE_AS_NEW", 3)
    run = Run()
    run.start_wft(1)
    started = attrs_of(run.history[-1])
    assert not started.suggest_continue_as_new
    run.complete_wft(2, start_timer("t", 1))
    run.fire_timer(3, "t")
    run.start_wft(4)
    started = attrs_of(run.history[-1])
    assert started.suggest_continue_as_new
    assert list(started.suggest_continue_as_new_reasons) == [
        SuggestContinueAsNewReason.SUGGEST_CONTINUE_AS_NEW_REASON_TOO_MANY_HISTORY_EVENTS
    ]
