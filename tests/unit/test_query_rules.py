"""When a run holds queries for its workflow task, and which changes release them (engine.history.query_consistency)."""

from __future__ import annotations

from engine.history import lifecycle
from engine.history.query_consistency import holds_queries, task_attempt
from tests.unit.history_harness import Run, complete_workflow, start_request, start_timer


def test_a_new_run_holds_queries_until_its_first_task_completes():
    run = Run()
    assert holds_queries(run.state)
    run.start_wft(1)
    assert holds_queries(run.state)
    run.complete_wft(2)
    assert not holds_queries(run.state)
    assert run.last.queries_held, "the completion is the change that releases them"


def test_a_run_with_a_task_scheduled_or_running_holds_queries():
    run = Run()
    run.run_wft(1, start_timer("t", 5))
    assert not holds_queries(run.state)
    run.signal(2, "poke")
    assert holds_queries(run.state), "scheduled"
    run.start_wft(3)
    assert holds_queries(run.state), "running"
    run.complete_wft(4)
    assert not holds_queries(run.state)


def test_a_task_that_fails_or_times_out_keeps_holding_them_for_the_next_attempt():
    run = Run()
    run.start_wft(1)
    run.fail_wft(2)
    assert holds_queries(run.state)
    assert task_attempt(run.state) == 2
    run.start_wft(3)
    run.timeout_wft(20)
    assert holds_queries(run.state)
    assert task_attempt(run.state) == 3


def test_a_run_waiting_for_its_start_delay_holds_them():
    run = Run(start_request(), schedule_first_task=False)
    assert run.state.workflow_task is None
    assert holds_queries(run.state)


def test_closing_releases_them():
    run = Run()
    run.run_wft(1, complete_workflow())
    assert not holds_queries(run.state)
    terminated = Run()
    terminated.apply(1, lifecycle.terminate, reason="stop", details=None, identity="me")
    assert not holds_queries(terminated.state)
    assert terminated.last.queries_held
