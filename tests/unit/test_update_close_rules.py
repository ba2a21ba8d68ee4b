"""Updates a run's close finds in flight: which callers get an outcome, NotFound, or are told to retry."""

from __future__ import annotations

from temporalio.api.command.v1 import Command, ContinueAsNewWorkflowExecutionCommandAttributes
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.enums.v1 import CommandType, ContinueAsNewInitiator
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.update.v1 import Input, Meta, Request

from engine.history import updates
from tests.unit.history_harness import TASK_QUEUE, Run, complete_workflow, start_request, types


def continue_as_new(**attrs) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
        continue_as_new_workflow_execution_command_attributes=ContinueAsNewWorkflowExecutionCommandAttributes(
            workflow_type=WorkflowType(name="MyWorkflow"), task_queue=TaskQueue(name=TASK_QUEUE), **attrs
        ),
    )


def admit_during_task(run: Run, update_id: str = "u1") -> None:
    """Admit an update while the run's workflow task is in flight (the worker has not seen it)."""
    run.start_wft(1)
    run.apply(1.5, updates.admit, request=Request(meta=Meta(update_id=update_id), input=Input(name="u")))


def test_continue_as_new_tells_the_caller_of_an_unseen_update_to_send_it_again():
    run = Run(start_request())
    admit_during_task(run)
    assert run.complete_wft(2, continue_as_new()) is None
    info = run.state.updates["u1"]
    assert (info.aborted, info.continuing, info.stage) == (True, True, updates.COMPLETED)
    assert types(run.new_events)[-1] == "WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
    continued = run.last.continued
    assert continued is not None
    assert continued.state.updates == {}  # the caller's retry admits it there


def test_completion_aborts_an_unseen_update_for_good():
    run = Run(start_request())
    admit_during_task(run)
    assert run.complete_wft(2, complete_workflow()) is None
    info = run.state.updates["u1"]
    assert (info.aborted, info.continuing) == (True, False)


def test_an_accepted_update_fails_even_when_the_run_continues():
    # Temporal does not move an accepted update to the new run: its caller gets the server's failure.
    run = Run(start_request())
    admit_during_task(run)
    run.state.updates["u1"].stage = updates.ACCEPTED
    assert run.complete_wft(2, continue_as_new()) is None
    info = run.state.updates["u1"]
    assert (info.aborted, info.continuing) == (False, False)
    assert (
        info.outcome
        == updates.Outcome(failure=updates.ACCEPTED_UPDATE_COMPLETED_WORKFLOW).SerializeToString()
    )


def test_the_continued_as_new_event_echoes_the_commands_initiator_and_build_id_inheritance():
    run = Run(start_request())
    run.start_wft(1)
    assert run.complete_wft(2, continue_as_new(inherit_build_id=True)) is None
    attrs = run.new_events[-1].workflow_execution_continued_as_new_event_attributes
    assert attrs.initiator == ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_UNSPECIFIED
    assert attrs.inherit_build_id
    continued = run.last.continued
    assert continued is not None
    started = continued.events[0].workflow_execution_started_event_attributes
    assert started.initiator == ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_WORKFLOW
