"""Pausing a whole run and updating its options: the pure rules (engine/history/pause.py, run_options.py)."""

from __future__ import annotations

import pytest
from temporalio.api.command.v1 import Command, ContinueAsNewWorkflowExecutionCommandAttributes
from temporalio.api.common.v1 import Priority, SearchAttributes, WorkflowType
from temporalio.api.deployment.v1 import WorkerDeploymentVersion
from temporalio.api.enums.v1 import CommandType
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions

from engine.errors import FailedPrecondition, InvalidArgument
from engine.history import activity, lifecycle, pause, pause_info, run_options, versioning
from engine.history.errors import RunClosed, StaleTask
from engine.history.mutation import TaskKind
from engine.history.state import PAUSED, RUNNING
from tests.unit.history_harness import Run, attrs_of, schedule_activity, start_timer, types


def _pause(run: Run, now: float, request_id: str = "p-1") -> None:
    run.apply(now, pause.pause, identity="ops", reason="look", request_id=request_id)


def _unpause(run: Run, now: float) -> None:
    run.apply(now, pause.unpause, identity="ops", reason="go", request_id="u-1")


def test_pause_writes_the_event_and_stops_workflow_tasks_until_unpaused():
    run = Run()
    run.run_wft(1, start_timer("t", 5))
    _pause(run, 2)
    assert types(run.new_events) == ["WORKFLOW_EXECUTION_PAUSED"]
    paused = run.new_events[0]
    assert paused.worker_may_ignore
    assert (attrs_of(paused).identity, attrs_of(paused).reason, attrs_of(paused).request_id) == (
        "ops",
        "look",
        "p-1",
    )
    assert (run.state.status, run.state.running, run.state.paused) == (PAUSED, True, True)

    run.signal(3, "sig")
    run.fire_timer(6, "t")
    assert run.types()[-2:] == ["WORKFLOW_EXECUTION_SIGNALED", "TIMER_FIRED"]
    assert run.state.workflow_task is None
    assert run.new_tasks == []

    _unpause(run, 7)
    assert types(run.new_events) == ["WORKFLOW_EXECUTION_UNPAUSED", "WORKFLOW_TASK_SCHEDULED"]
    assert run.new_events[0].worker_may_ignore
    assert [t.kind for t in run.new_tasks] == [TaskKind.WORKFLOW]
    assert (run.state.status, run.state.pause) == (RUNNING, None)


def test_a_pause_repeated_with_its_request_id_is_a_no_op_and_another_is_refused():
    run = Run()
    run.run_wft(1, start_timer("t", 5))
    _pause(run, 2)
    _pause(run, 3)  # the same request id
    assert run.new_events == []
    with pytest.raises(FailedPrecondition, match=r"^workflow is already paused\.$"):
        _pause(run, 4, request_id="p-2")
    with pytest.raises(FailedPrecondition, match=r"^workflow is already paused\.$"):
        _pause(run, 4, request_id="")  # no request id never matches


def test_unpause_of_a_running_run_and_controls_of_a_closed_run_are_refused():
    run = Run()
    run.run_wft(1, start_timer("t", 5))
    with pytest.raises(FailedPrecondition, match=r"^workflow is not paused\.$"):
        _unpause(run, 2)
    _pause(run, 2)
    run.apply(3, lifecycle.terminate, reason="done", details=None, identity="ops")
    with pytest.raises(RunClosed):
        _pause(run, 4, request_id="p-9")
    with pytest.raises(RunClosed):
        _unpause(run, 4)


def test_a_task_in_flight_completes_and_the_pause_lands_after_it_without_a_next_task():
    run = Run()
    run.start_wft(1)
    _pause(run, 2)
    assert run.new_events == []  # buffered behind the task in flight
    run.complete_wft(3, start_timer("t", 5))
    assert types(run.new_events) == ["WORKFLOW_TASK_COMPLETED", "TIMER_STARTED", "WORKFLOW_EXECUTION_PAUSED"]
    assert run.state.workflow_task is None


def test_a_task_in_flight_may_not_ask_for_another_while_paused():
    run = Run()
    run.start_wft(1)
    _pause(run, 2)
    with pytest.raises(FailedPrecondition, match=r"^Workflow is paused and force create new workflow task"):
        run.complete_wft(3, force_create_new_workflow_task=True)
    assert run.state.workflow_task is not None  # refused: nothing of the completion was applied


def test_a_scheduled_task_is_not_handed_out_while_paused_and_is_requeued_on_unpause():
    run = Run()  # the first task is scheduled, not started
    _pause(run, 1)
    assert types(run.new_events) == ["WORKFLOW_EXECUTION_PAUSED"]
    scheduled = run.state.workflow_task
    assert scheduled is not None
    with pytest.raises(StaleTask, match="paused"):
        run.start_wft(2)
    _unpause(run, 3)
    assert types(run.new_events) == ["WORKFLOW_EXECUTION_UNPAUSED"]
    assert [(t.kind, t.scheduled_event_id) for t in run.new_tasks] == [
        (TaskKind.WORKFLOW, scheduled.scheduled_event_id)
    ]
    run.start_wft(4)
    assert run.types()[-1] == "WORKFLOW_TASK_STARTED"


def test_an_activity_waiting_is_not_dispatched_while_paused_and_is_queued_again_on_unpause():
    run = Run()
    assert run.run_wft(1, schedule_activity("a", start_to_close=10)) is None
    [sid] = run.state.activities
    _pause(run, 2)
    with pytest.raises(StaleTask, match="paused"):
        run.apply(3, activity.start, scheduled_event_id=sid, attempt=1, identity="w", request_id="r")
    _unpause(run, 4)
    assert sorted(t.kind for t in run.new_tasks) == [TaskKind.WORKFLOW, TaskKind.ACTIVITY]
    run.start_activity(5, sid)


def _nowhere(task_queue: str, deployment_name: str, build_id: str) -> bool:
    return False


def _update(run: Run, step: int, options: WorkflowExecutionOptions, *paths: str, known=_nowhere):
    return run.apply(
        step, run_options.update, options=options, paths=list(paths), identity="ops", version_in_queue=known
    )


def test_options_update_priority_merges_by_mask():
    run = Run()
    merged = _update(
        run, 1, WorkflowExecutionOptions(priority=Priority(priority_key=2, fairness_key="a")), "priority"
    )
    assert merged.priority == Priority(priority_key=2, fairness_key="a")
    assert types(run.new_events) == ["WORKFLOW_EXECUTION_OPTIONS_UPDATED"]
    assert attrs_of(run.new_events[0]).unset_versioning_override
    assert run_options.current(run.state).priority == Priority(priority_key=2, fairness_key="a")

    one = WorkflowExecutionOptions(priority=Priority(priority_key=3))
    merged = _update(run, 2, one, "priority.priority_key")
    assert merged.priority == Priority(priority_key=3, fairness_key="a")

    _update(run, 3, one, "priority.priority_key")
    assert run.new_events == []  # nothing changed, nothing written


def test_options_update_sets_checks_and_clears_a_versioning_override():
    run = Run()
    version = WorkerDeploymentVersion(deployment_name="orders", build_id="2.0")
    pinned_no_version = VersioningOverride(
        pinned=VersioningOverride.PinnedOverride(behavior=VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED)
    )
    pinned = VersioningOverride()
    pinned.CopyFrom(pinned_no_version)
    pinned.pinned.version.CopyFrom(version)

    # Nothing to pin to yet, and a version the run's queue does not know: refused, nothing written.
    with pytest.raises(FailedPrecondition, match="has behavior Unspecified and is not yet pinned"):
        _update(
            run, 1, WorkflowExecutionOptions(versioning_override=pinned_no_version), "versioning_override"
        )
    with pytest.raises(FailedPrecondition, match=r"Pinned version 'orders:2.0' is not present in task queue"):
        _update(run, 1, WorkflowExecutionOptions(versioning_override=pinned), "versioning_override")
    one_time = VersioningOverride(
        one_time=VersioningOverride.OneTimeOverride(target_deployment_version=version)
    )
    with pytest.raises(FailedPrecondition, match=r"Pinned version 'orders:2.0' is not present in task queue"):
        _update(run, 1, WorkflowExecutionOptions(versioning_override=one_time), "versioning_override")
    with pytest.raises(InvalidArgument, match="partial updates"):
        _update(
            run,
            1,
            WorkflowExecutionOptions(versioning_override=VersioningOverride(auto_upgrade=True)),
            "versioning_override.auto_upgrade",
        )
    assert run.state.override_behavior == 0

    def known(task_queue: str, deployment_name: str, build_id: str) -> bool:
        return (task_queue, deployment_name, build_id) == (run.state.task_queue, "orders", "2.0")

    merged = _update(
        run, 1, WorkflowExecutionOptions(versioning_override=pinned), "versioning_override", known=known
    )
    assert merged.versioning_override == pinned
    assert attrs_of(run.new_events[0]).versioning_override == pinned
    assert not attrs_of(run.new_events[0]).unset_versioning_override
    assert versioning.effective_version(run.state) == (versioning.PINNED, "orders", "2.0")

    # Pinned already: an override without a version pins the run where it is; the same override writes nothing.
    _update(
        run,
        2,
        WorkflowExecutionOptions(versioning_override=pinned_no_version),
        "versioning_override",
        known=known,
    )
    assert run.new_events == []

    _update(run, 3, WorkflowExecutionOptions(), "versioning_override")
    assert attrs_of(run.new_events[0]).unset_versioning_override
    assert run.state.override_behavior == 0
    assert not run_options.current(run.state).HasField("versioning_override")


def test_pause_info_is_indexed_while_paused_and_not_inherited_by_the_next_run():
    run = Run()
    run.start_wft(1)
    _pause(run, 2)
    attributes = SearchAttributes.FromString(run.state.search_attributes).indexed_fields
    assert attributes["TemporalPauseInfo"].data == b'["Workflow:wf-1","Reason:look"]'
    assert attributes["TemporalPauseInfo"].metadata["type"] == b"KeywordList"

    # As in Temporal, the buffered Paused event is news the worker has not seen: a closing command fails
    # the task (UnhandledCommand), no task follows while paused, and the unpause schedules a first attempt.
    continue_as_new = Command(
        command_type=CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
        continue_as_new_workflow_execution_command_attributes=ContinueAsNewWorkflowExecutionCommandAttributes(
            workflow_type=WorkflowType(name="MyWorkflow")
        ),
    )
    failure = run.complete_wft(3, continue_as_new)
    assert failure is not None
    assert types(run.new_events) == ["WORKFLOW_TASK_FAILED", "WORKFLOW_EXECUTION_PAUSED"]
    assert run.state.workflow_task is None
    # What a next run of the chain would inherit: not the pause info, which describes this run.
    assert "TemporalPauseInfo" in SearchAttributes.FromString(run.state.search_attributes).indexed_fields
    assert pause_info.inheritable(run.state.search_attributes) is None
    _unpause(run, 4)
    assert attrs_of(run.new_events[-1]).attempt == 1


def test_unpause_removes_the_pause_info():
    run = Run()
    run.run_wft(1, start_timer("t", 5))
    _pause(run, 2)
    _unpause(run, 3)
    attributes = SearchAttributes.FromString(run.state.search_attributes)
    assert pause_info.ATTRIBUTE not in attributes.indexed_fields
    assert set(attributes.indexed_fields) == {"BuildIds"}  # the unversioned worker's, kept by the server
