"""A namespace named twice (issue 10, item 1): every field that names a namespace is authorised.

Two organisations' keys against a running server: a request naming the caller's own namespace in one
field and another's (another tenant's, or the operator's `default`) in another must be refused, not
answered about the other one.
"""

from __future__ import annotations

import grpc
import pytest
from google.rpc import status_pb2
from temporalio.api.command.v1 import (
    Command,
    CompleteWorkflowExecutionCommandAttributes,
    SignalExternalWorkflowExecutionCommandAttributes,
    StartChildWorkflowExecutionCommandAttributes,
)
from temporalio.api.common.v1 import WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import CommandType, WorkflowExecutionStatus
from temporalio.api.errordetails.v1 import MultiOperationExecutionFailure
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.operatorservice.v1 import service_pb2_grpc as oss
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.update.v1 import Input, Meta
from temporalio.api.update.v1 import Request as UpdateRequest
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.api.workflowservice.v1 import service_pb2_grpc as wss

from engine import tokens
from tests.e2e.conftest import new_id
from tests.e2e.test_auth import metadata, tenants  # noqa: F401 (the fixture)


async def _ids(channel, *names: str) -> dict[str, str]:
    """Namespace ids, read by the operator (the loopback allowance)."""
    stub = wss.WorkflowServiceStub(channel)
    described = [await stub.DescribeNamespace(rr.DescribeNamespaceRequest(namespace=n)) for n in names]
    return {n: d.namespace_info.id for n, d in zip(names, described, strict=True)}


async def _refused(call, code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code, caught.value.details()
    return caught.value


async def test_describe_namespace_answers_only_about_the_namespace_authorised(server, tenants):  # noqa: F811
    """The hole: `namespace` = the caller's own, `id` = another's answered with the other's settings."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        ids = await _ids(channel, tenants.ns_a, tenants.ns_b, "default")
        stub = wss.WorkflowServiceStub(channel)
        key = tenants.keys["a-reader"]
        for other in (tenants.ns_b, "default"):
            refused = await _refused(
                stub.DescribeNamespace(
                    rr.DescribeNamespaceRequest(namespace=tenants.ns_a, id=ids[other]),
                    metadata=metadata(key),
                ),
                grpc.StatusCode.PERMISSION_DENIED,
            )
            assert other not in (refused.details() or "")
            await _refused(
                stub.DescribeNamespace(rr.DescribeNamespaceRequest(id=ids[other]), metadata=metadata(key)),
                grpc.StatusCode.PERMISSION_DENIED,
            )
        # Its own namespace by either field still answers; by both, as Temporal: INVALID_ARGUMENT.
        by_id = await stub.DescribeNamespace(
            rr.DescribeNamespaceRequest(id=ids[tenants.ns_a]), metadata=metadata(key)
        )
        assert by_id.namespace_info.name == tenants.ns_a
        both = await _refused(
            stub.DescribeNamespace(
                rr.DescribeNamespaceRequest(namespace=tenants.ns_a, id=ids[tenants.ns_a]),
                metadata=metadata(key),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        assert both.details() == "GetNamespace operation failed.  Both ID and Name specified in request."
        # The operator gets the same answer: the handler never picks one of two names.
        await _refused(
            stub.DescribeNamespace(rr.DescribeNamespaceRequest(namespace="default", id=ids[tenants.ns_b])),
            grpc.StatusCode.INVALID_ARGUMENT,
        )


def _multi(outer: str, start_ns: str, update_ns: str) -> rr.ExecuteMultiOperationRequest:
    workflow_id = new_id()
    start = rr.StartWorkflowExecutionRequest(
        namespace=start_ns,
        workflow_id=workflow_id,
        workflow_type=WorkflowType(name="Nothing"),
        task_queue=TaskQueue(name="nowhere"),
        request_id=new_id("req"),
    )
    update = rr.UpdateWorkflowExecutionRequest(
        namespace=update_ns,
        workflow_execution=WorkflowExecution(workflow_id=workflow_id),
        request=UpdateRequest(meta=Meta(update_id="u"), input=Input(name="u")),
    )
    op = rr.ExecuteMultiOperationRequest.Operation
    return rr.ExecuteMultiOperationRequest(
        namespace=outer, operations=[op(start_workflow=start), op(update_workflow=update)]
    )


async def test_inner_requests_and_other_fields_are_authorised(server, tenants):  # noqa: F811
    async with grpc.aio.insecure_channel(server.address) as channel:
        ids = await _ids(channel, tenants.ns_a, tenants.ns_b)
        stub = wss.WorkflowServiceStub(channel)
        key = tenants.keys["a-operator"]
        # ExecuteMultiOperation whose inner start or update names B (or default): no run starts anywhere.
        for request in (
            _multi(tenants.ns_a, tenants.ns_b, tenants.ns_a),
            _multi(tenants.ns_a, tenants.ns_a, "default"),
        ):
            refused = await _refused(
                stub.ExecuteMultiOperation(request, metadata=metadata(key), timeout=10),
                grpc.StatusCode.PERMISSION_DENIED,
            )
            assert "operations[]" in (refused.details() or "")
        # The operator's mismatch is refused as Temporal refuses it, per operation.
        refused = await _refused(
            stub.ExecuteMultiOperation(_multi("default", tenants.ns_b, "default"), timeout=10),
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        details = dict(refused.trailing_metadata() or ())
        status = status_pb2.Status.FromString(details["grpc-status-details-bin"])
        failure = MultiOperationExecutionFailure()
        status.details[0].Unpack(failure)
        assert failure.statuses[0].message == "Operation namespace did not match request's namespace."
        # A task token of B's namespace sent under A's name.
        stolen = tokens.encode(tokens.TaskToken(ids[tenants.ns_b], "wf", "run", 5, 1))
        refused = await _refused(
            stub.RespondActivityTaskCompleted(
                rr.RespondActivityTaskCompletedRequest(namespace=tenants.ns_a, task_token=stolen),
                metadata=metadata(key),
            ),
            grpc.StatusCode.PERMISSION_DENIED,
        )
        assert "task_token" in (refused.details() or "")
        # OperatorService.DeleteNamespace by B's id, alone or beside A's name: nothing is deleted.
        operator = oss.OperatorServiceStub(channel)
        admin = tenants.keys["a"]
        for request in (
            orr.DeleteNamespaceRequest(namespace_id=ids[tenants.ns_b]),
            orr.DeleteNamespaceRequest(namespace=tenants.ns_a, namespace_id=ids[tenants.ns_b]),
        ):
            await _refused(
                operator.DeleteNamespace(request, metadata=metadata(admin)), grpc.StatusCode.PERMISSION_DENIED
            )
        for name in (tenants.ns_a, tenants.ns_b):
            described = await stub.DescribeNamespace(rr.DescribeNamespaceRequest(namespace=name))
            assert described.namespace_info.name == name


async def test_a_workflow_task_cannot_reach_a_namespace_the_key_does_not_cover(server, tenants):  # noqa: F811
    """A command naming another tenant's (or the operator's) namespace is refused to the worker's key
    before the history rules see it; the task itself can still be completed."""
    key = tenants.keys["a-operator"]
    queue = f"tq-{new_id()}"
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        workflow_id = new_id()
        await stub.StartWorkflowExecution(
            rr.StartWorkflowExecutionRequest(
                namespace=tenants.ns_a,
                workflow_id=workflow_id,
                workflow_type=WorkflowType(name="Raw"),
                task_queue=TaskQueue(name=queue),
                request_id=new_id("req"),
            ),
            metadata=metadata(key),
        )
        task = await stub.PollWorkflowTaskQueue(
            rr.PollWorkflowTaskQueueRequest(namespace=tenants.ns_a, task_queue=TaskQueue(name=queue)),
            metadata=metadata(key),
            timeout=30,
        )
        assert task.task_token
        commands = [
            Command(
                command_type=CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
                start_child_workflow_execution_command_attributes=StartChildWorkflowExecutionCommandAttributes(
                    namespace=tenants.ns_b,
                    workflow_id=new_id(),
                    workflow_type=WorkflowType(name="Raw"),
                    task_queue=TaskQueue(name=queue),
                ),
            ),
            Command(
                command_type=CommandType.COMMAND_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION,
                signal_external_workflow_execution_command_attributes=SignalExternalWorkflowExecutionCommandAttributes(
                    namespace="default", execution=WorkflowExecution(workflow_id="any"), signal_name="s"
                ),
            ),
        ]
        for command in commands:
            refused = await _refused(
                stub.RespondWorkflowTaskCompleted(
                    rr.RespondWorkflowTaskCompletedRequest(
                        namespace=tenants.ns_a, task_token=task.task_token, commands=[command]
                    ),
                    metadata=metadata(key),
                ),
                grpc.StatusCode.PERMISSION_DENIED,
            )
            assert "commands[]" in (refused.details() or "")
        complete = Command(
            command_type=CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
            complete_workflow_execution_command_attributes=CompleteWorkflowExecutionCommandAttributes(),
        )
        await stub.RespondWorkflowTaskCompleted(
            rr.RespondWorkflowTaskCompletedRequest(
                namespace=tenants.ns_a, task_token=task.task_token, commands=[complete]
            ),
            metadata=metadata(key),
        )
        described = await stub.DescribeWorkflowExecution(
            rr.DescribeWorkflowExecutionRequest(
                namespace=tenants.ns_a, execution=WorkflowExecution(workflow_id=workflow_id)
            ),
            metadata=metadata(key),
        )
        assert (
            described.workflow_execution_info.status
            == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED
        )
