"""Bad requests get the gRPC status and message the SDK expects, and change nothing."""

from __future__ import annotations

import uuid

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.common.v1 import Payload, Payloads, WorkflowExecution, WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    GetWorkflowExecutionHistoryRequest,
    PollActivityTaskQueueRequest,
    PollWorkflowTaskQueueRequest,
    RecordActivityTaskHeartbeatRequest,
    RespondActivityTaskCompletedRequest,
    RespondWorkflowTaskCompletedRequest,
    SignalWorkflowExecutionRequest,
    StartWorkflowExecutionRequest,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e import workflows as w
from tests.e2e.conftest import new_id


def start_request(**overrides) -> StartWorkflowExecutionRequest:
    fields = {
        "namespace": "default",
        "workflow_id": new_id(),
        "workflow_type": WorkflowType(name="HelloWorkflow"),
        "task_queue": TaskQueue(name=f"tq-{uuid.uuid4()}"),
        "request_id": str(uuid.uuid4()),
    }
    fields.update(overrides)
    return StartWorkflowExecutionRequest(**fields)


async def expect(call, status: RPCStatusCode, fragment: str) -> RPCError:
    with pytest.raises(RPCError) as info:
        await call
    assert info.value.status == status, info.value.message
    assert fragment in info.value.message
    return info.value


@pytest.mark.parametrize(
    ("overrides", "status", "fragment"),
    [
        (
            {"namespace": "no-such-namespace"},
            RPCStatusCode.NOT_FOUND,
            "Namespace no-such-namespace is not found.",
        ),
        ({"workflow_id": ""}, RPCStatusCode.INVALID_ARGUMENT, "WorkflowId is not set on request."),
        (
            {"workflow_id": "x" * 1001},
            RPCStatusCode.INVALID_ARGUMENT,
            "WorkflowId exceeds maximum allowed length",
        ),
        ({"task_queue": TaskQueue(name="")}, RPCStatusCode.INVALID_ARGUMENT, "missing task queue name"),
        ({"workflow_type": WorkflowType(name="")}, RPCStatusCode.INVALID_ARGUMENT, "WorkflowType is not set"),
        (
            {"workflow_run_timeout": Duration(seconds=-5)},
            RPCStatusCode.INVALID_ARGUMENT,
            "WorkflowRunTimeoutSeconds is set on request. cause: negative duration",
        ),
        (
            {"input": Payloads(payloads=[Payload(data=b"x" * (2 * 1024 * 1024 + 100))])},
            RPCStatusCode.INVALID_ARGUMENT,
            "the limit is 2097152 bytes (2 MiB)",
        ),
    ],
)
async def test_invalid_start_is_refused_and_writes_nothing(client, overrides, status, fragment):
    request = start_request(**overrides)
    await expect(client.workflow_service.start_workflow_execution(request), status, fragment)
    if request.workflow_id and len(request.workflow_id) <= 1000 and overrides.get("namespace") is None:
        await expect(
            client.workflow_service.get_workflow_execution_history(
                GetWorkflowExecutionHistoryRequest(
                    namespace="default", execution=WorkflowExecution(workflow_id=request.workflow_id)
                )
            ),
            RPCStatusCode.NOT_FOUND,
            "workflow not found",
        )


async def test_second_start_of_a_running_id_names_the_run(client, worker, task_queue):
    workflow_id = new_id()
    handle = await client.start_workflow(w.LongSleepWorkflow.run, id=workflow_id, task_queue=task_queue)
    with pytest.raises(WorkflowAlreadyStartedError) as info:
        await client.start_workflow(w.LongSleepWorkflow.run, id=workflow_id, task_queue=task_queue)
    assert info.value.run_id == handle.result_run_id
    await handle.terminate()


async def test_start_with_the_same_request_id_is_idempotent(client):
    request = start_request()
    first = await client.workflow_service.start_workflow_execution(request)
    again = await client.workflow_service.start_workflow_execution(request)
    assert first.run_id == again.run_id


async def test_bogus_task_tokens(client):
    for call in (
        client.workflow_service.respond_workflow_task_completed(
            RespondWorkflowTaskCompletedRequest(namespace="default", task_token=b"xyz")
        ),
        client.workflow_service.respond_activity_task_completed(
            RespondActivityTaskCompletedRequest(namespace="default", task_token=b"xyz")
        ),
        client.workflow_service.record_activity_task_heartbeat(
            RecordActivityTaskHeartbeatRequest(namespace="default", task_token=b"xyz")
        ),
    ):
        await expect(call, RPCStatusCode.INVALID_ARGUMENT, "Error deserializing task token.")
    await expect(
        client.workflow_service.respond_workflow_task_completed(
            RespondWorkflowTaskCompletedRequest(namespace="default")
        ),
        RPCStatusCode.INVALID_ARGUMENT,
        "Task token not set on request.",
    )


async def test_replayed_tokens_are_rejected_never_applied_twice(client):
    """Complete a workflow task by hand, then replay the same completion: NotFound, one completion event."""
    request = start_request()
    await client.workflow_service.start_workflow_execution(request)
    poll = await client.workflow_service.poll_workflow_task_queue(
        PollWorkflowTaskQueueRequest(namespace="default", task_queue=request.task_queue, identity="test")
    )
    assert poll.task_token
    from temporalio.api.command.v1 import Command, ScheduleActivityTaskCommandAttributes
    from temporalio.api.common.v1 import ActivityType
    from temporalio.api.enums.v1 import CommandType, EventType

    schedule = Command(
        command_type=CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
        schedule_activity_task_command_attributes=ScheduleActivityTaskCommandAttributes(
            activity_id="1",
            activity_type=ActivityType(name="greet"),
            task_queue=request.task_queue,
            start_to_close_timeout=Duration(seconds=10),
        ),
    )
    completion = RespondWorkflowTaskCompletedRequest(
        namespace="default", task_token=poll.task_token, commands=[schedule], identity="test"
    )
    await client.workflow_service.respond_workflow_task_completed(completion)
    await expect(
        client.workflow_service.respond_workflow_task_completed(completion),
        RPCStatusCode.NOT_FOUND,
        "Workflow task not found.",
    )
    activity = await client.workflow_service.poll_activity_task_queue(
        PollActivityTaskQueueRequest(namespace="default", task_queue=request.task_queue, identity="test")
    )
    done = RespondActivityTaskCompletedRequest(
        namespace="default", task_token=activity.task_token, identity="test"
    )
    await client.workflow_service.respond_activity_task_completed(done)
    await expect(
        client.workflow_service.respond_activity_task_completed(done),
        RPCStatusCode.NOT_FOUND,
        "invalid activityID or activity already timed out",
    )
    history = await client.workflow_service.get_workflow_execution_history(
        GetWorkflowExecutionHistoryRequest(
            namespace="default", execution=WorkflowExecution(workflow_id=request.workflow_id)
        )
    )
    types = [e.event_type for e in history.history.events]
    assert types.count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) == 1
    assert types.count(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) == 1


async def test_a_command_after_the_closing_command_refuses_the_completion(client):
    """[CompleteWorkflowExecution, StartTimer]: the real server refuses the whole completion with these words
    and the run stays open with nothing written (Perdura used to complete the run and drop the timer)."""
    from temporalio.api.command.v1 import (
        Command,
        CompleteWorkflowExecutionCommandAttributes,
        StartTimerCommandAttributes,
    )
    from temporalio.api.enums.v1 import CommandType, EventType, WorkflowExecutionStatus
    from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest

    request = start_request()
    await client.workflow_service.start_workflow_execution(request)
    poll = await client.workflow_service.poll_workflow_task_queue(
        PollWorkflowTaskQueueRequest(namespace="default", task_queue=request.task_queue, identity="test")
    )
    commands = [
        Command(
            command_type=CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
            complete_workflow_execution_command_attributes=CompleteWorkflowExecutionCommandAttributes(),
        ),
        Command(
            command_type=CommandType.COMMAND_TYPE_START_TIMER,
            start_timer_command_attributes=StartTimerCommandAttributes(
                timer_id="t1", start_to_fire_timeout=Duration(seconds=5)
            ),
        ),
    ]
    await expect(
        client.workflow_service.respond_workflow_task_completed(
            RespondWorkflowTaskCompletedRequest(
                namespace="default", task_token=poll.task_token, commands=commands, identity="test"
            )
        ),
        RPCStatusCode.INVALID_ARGUMENT,
        "invalid command sequence: [CompleteWorkflowExecution, StartTimer], "
        "command CompleteWorkflowExecution must be the last command.",
    )
    execution = WorkflowExecution(workflow_id=request.workflow_id)
    described = await client.workflow_service.describe_workflow_execution(
        DescribeWorkflowExecutionRequest(namespace="default", execution=execution)
    )
    assert (
        described.workflow_execution_info.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
    )
    history = await client.workflow_service.get_workflow_execution_history(
        GetWorkflowExecutionHistoryRequest(namespace="default", execution=execution)
    )
    assert [e.event_type for e in history.history.events] == [
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    ]


async def test_signal_to_closed_or_unknown_run(client, worker, task_queue):
    handle = await client.start_workflow(w.HelloWorkflow.run, "x", id=new_id(), task_queue=task_queue)
    await handle.result()
    await expect(
        handle.signal(w.SignalWorkflow.add, "late"),
        RPCStatusCode.NOT_FOUND,
        "workflow execution already completed",
    )
    await expect(
        client.workflow_service.signal_workflow_execution(
            SignalWorkflowExecutionRequest(
                namespace="default",
                workflow_execution=WorkflowExecution(workflow_id=new_id()),
                signal_name="s",
            )
        ),
        RPCStatusCode.NOT_FOUND,
        "workflow not found for ID",
    )
    await expect(
        client.workflow_service.get_workflow_execution_history(
            GetWorkflowExecutionHistoryRequest(
                namespace="default", execution=WorkflowExecution(workflow_id="w", run_id="not-a-uuid")
            )
        ),
        RPCStatusCode.INVALID_ARGUMENT,
        "Invalid RunId.",
    )
    # Cancelling a closed run is accepted and writes nothing, as in Temporal.
    await handle.cancel()
