"""Per-namespace rate limits (issue 5): a namespace over its limit is refused with Temporal's
RESOURCE_EXHAUSTED, the SDK's own retries then get through, and another namespace is unaffected.

Each test makes namespaces of its own and gives them tiny limits with the operator CLI
(`perdura namespace update NAME --actions-rps 1`), against `perdura dev` (buckets in memory) and the
production processes (buckets in Redis).
"""

from __future__ import annotations

import time
import uuid

import grpc
import pytest
from google.rpc import status_pb2
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.enums.v1 import ResourceExhaustedCause, ResourceExhaustedScope
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.api.workflowservice.v1 import service_pb2_grpc as wss
from temporalio.client import Client
from temporalio.worker import Worker

from tests.e2e.conftest import new_id
from tests.e2e.workflows import HelloWorkflow, greet


def tenant(server, **rps: str) -> tuple[str, str]:
    """An organisation with namespaces `a` (limited by `rps`, e.g. actions="1") and `b` (defaults)."""
    org = f"rl{uuid.uuid4().hex[:8]}"
    server.cli("org", "create", org, "--owner", f"owner@{org}.example")
    server.cli("namespace", "create", "a", "--org", org)
    server.cli("namespace", "create", "b", "--org", org)
    flags = [item for bucket, value in rps.items() for item in (f"--{bucket}-rps", value)]
    out = server.cli("namespace", "update", f"a.{org}", *flags)
    for bucket, value in rps.items():
        assert f"{bucket} {value}/s" in out
    return f"a.{org}", f"b.{org}"


def start_request(namespace: str) -> rr.StartWorkflowExecutionRequest:
    return rr.StartWorkflowExecutionRequest(
        namespace=namespace,
        workflow_id=new_id(),
        workflow_type=WorkflowType(name="HelloWorkflow"),
        task_queue=TaskQueue(name=f"tq-{uuid.uuid4()}"),
        request_id=str(uuid.uuid4()),
    )


def resource_exhausted_failure(error: grpc.aio.AioRpcError) -> ResourceExhaustedFailure:
    raw = dict(error.trailing_metadata() or ())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(raw)
    failure = ResourceExhaustedFailure()
    assert status.details[0].Unpack(failure)
    return failure


async def test_a_namespace_over_its_action_limit_is_refused_and_the_sdk_retries_through(server):
    limited, other = tenant(server, actions="1")  # one start a second, two at once
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        outcomes: list[grpc.aio.AioRpcError | None] = []
        for _ in range(4):
            try:
                await stub.StartWorkflowExecution(start_request(limited))
                outcomes.append(None)
            except grpc.aio.AioRpcError as e:
                outcomes.append(e)
        assert outcomes[0] is None
        refused = [e for e in outcomes if e is not None]
        assert refused, "four starts at once passed a limit of one a second with a burst of two"
        for error in refused:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.details()
            assert "namespace rate limit exceeded" in error.details()
            assert limited in error.details()
            failure = resource_exhausted_failure(error)
            assert failure.cause == ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT
            assert failure.scope == ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE
        # Signals draw from the same bucket as starts.
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SignalWorkflowExecution(
                rr.SignalWorkflowExecutionRequest(namespace=limited, signal_name="go", request_id="x")
            )
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # The other namespace of the same organisation is not slowed down at all.
        began = time.monotonic()
        for _ in range(20):
            await stub.StartWorkflowExecution(start_request(other))
        assert time.monotonic() - began < 10

    # The SDK retries RESOURCE_EXHAUSTED with backoff: every start gets through, paced by the limit.
    client = await Client.connect(server.address, namespace=limited)
    began = time.monotonic()
    for i in range(4):
        await client.start_workflow(HelloWorkflow.run, str(i), id=new_id(), task_queue=f"tq-{uuid.uuid4()}")
    assert time.monotonic() - began >= 1.0  # the bucket was empty: the starts waited for tokens


async def test_a_flooded_namespace_is_refused_from_its_header_before_the_request_is_decoded(server):
    limited, other = tenant(server, actions="1")
    start = "/temporal.api.workflowservice.v1.WorkflowService/StartWorkflowExecution"
    undecodable = b"\xff\xff\xff"  # a truncated field tag: no protobuf decoder accepts it
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        codes = []  # the full path finds the bucket empty (a burst of two)
        for _ in range(4):
            try:
                await stub.StartWorkflowExecution(start_request(limited))
                codes.append(grpc.StatusCode.OK)
            except grpc.aio.AioRpcError as e:
                codes.append(e.code())
        assert codes[-1] == grpc.StatusCode.RESOURCE_EXHAUSTED, codes
        raw = channel.unary_unary(start)  # bytes in, bytes out

        # Named by the header the SDKs send, the call is refused without its bytes being read, with the
        # same status, message and details as the full path.
        with pytest.raises(grpc.aio.AioRpcError) as shed:
            await raw(undecodable, metadata=(("temporal-namespace", limited),))
        assert shed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, shed.value.details()
        assert f"namespace rate limit exceeded: namespace {limited!r}" in shed.value.details()
        failure = resource_exhausted_failure(shed.value)
        assert failure.cause == ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT
        assert failure.scope == ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE

        # The same bytes named as a namespace with tokens reach the decoder, which rejects them.
        with pytest.raises(grpc.aio.AioRpcError) as decoded:
            await raw(undecodable, metadata=(("temporal-namespace", other),))
        assert decoded.value.code() != grpc.StatusCode.RESOURCE_EXHAUSTED

    # Once the bucket refills, the header path lets the call through to the full check again.
    time.sleep(2.1)
    client = await Client.connect(server.address, namespace=limited)
    await client.start_workflow(HelloWorkflow.run, "x", id=new_id(), task_queue=f"tq-{uuid.uuid4()}")


async def test_visibility_queries_have_their_own_bucket(server):
    limited, _ = tenant(server, visibility="1")
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        codes = []
        for _ in range(4):
            try:
                await stub.CountWorkflowExecutions(rr.CountWorkflowExecutionsRequest(namespace=limited))
                codes.append(grpc.StatusCode.OK)
            except grpc.aio.AioRpcError as e:
                codes.append(e.code())
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes, codes
        # Starts are another bucket: still open.
        await stub.StartWorkflowExecution(start_request(limited))


async def test_workers_keep_working_when_polls_are_throttled(server):
    """A poll takes a token when it arrives; refused polls are retried by the SDK's pollers, so a
    worker on a namespace with a tiny poll rate still runs its workflows to completion."""
    limited, _ = tenant(server, polls="4")
    client = await Client.connect(server.address, namespace=limited)
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
        results = [
            await client.execute_workflow(HelloWorkflow.run, f"w{i}", id=new_id(), task_queue=queue)
            for i in range(3)
        ]
    assert results == ["hello w0", "hello w1", "hello w2"]
