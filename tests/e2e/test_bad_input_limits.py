"""Every bound at the edge, end to end: each bad request gets what the real Temporal server answers, and
nothing is half-written.

The expectations were taken from `temporal server start-dev` (CLI 1.5, server 1.29) with the same requests:
- it caps durations at 100 years (3,153,600,000 s) and the workflow task timeout at 120 s, so those starts
  succeed with the cap; before this change each of them was INTERNAL here (a date overflow);
- it answers INVALID_ARGUMENT, in the words asserted below, for mixed-sign durations, over-long signal names,
  and bad commands (the workflow task fails with the command's cause, and the RPC answers INVALID_ARGUMENT);
- it accepts a NaN or infinite backoff coefficient, a 3 MiB header, a 1 MiB identity on a start or signal, and
  a failure nested 99 deep (whose history it then cannot read: INTERNAL); it answers UNKNOWN for a
  DescribeNamespace id that is not a UUID and for a garbage ListSchedules token, and INTERNAL for invalid
  UTF-8. For these Perdura answers INVALID_ARGUMENT with the limit (README, "Request limits").
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.command.v1 import (
    Command,
    CompleteWorkflowExecutionCommandAttributes,
    ContinueAsNewWorkflowExecutionCommandAttributes,
    RecordMarkerCommandAttributes,
    ScheduleActivityTaskCommandAttributes,
    StartChildWorkflowExecutionCommandAttributes,
    StartTimerCommandAttributes,
)
from temporalio.api.common.v1 import (
    ActivityType,
    Header,
    Payload,
    RetryPolicy,
    WorkflowExecution,
    WorkflowType,
)
from temporalio.api.enums.v1 import CommandType, EventType, WorkflowExecutionStatus, WorkflowTaskFailedCause
from temporalio.api.operatorservice.v1 import service_pb2 as operator_service
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    CountWorkflowExecutionsRequest,
    DescribeNamespaceRequest,
    DescribeWorkflowExecutionRequest,
    GetWorkflowExecutionHistoryRequest,
    GetWorkflowExecutionHistoryReverseRequest,
    ListSchedulesRequest,
    ListWorkflowExecutionsRequest,
    PollActivityTaskQueueRequest,
    PollWorkflowTaskQueueRequest,
    RespondWorkflowTaskCompletedRequest,
    RespondWorkflowTaskFailedRequest,
    SignalWithStartWorkflowExecutionRequest,
    SignalWorkflowExecutionRequest,
)
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.api.workflowservice.v1 import service_pb2 as workflow_service
from temporalio.api.workflowservice.v1 import service_pb2_grpc as wss
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e.test_bad_input import expect, start_request

CAP = 3_153_600_000
"""Temporal's 100-year cap on durations, in seconds."""
DURATION_MAX = 315_576_000_000
BIG = 10**12
INVALID = RPCStatusCode.INVALID_ARGUMENT
Cause = WorkflowTaskFailedCause


async def history(client, workflow_id: str, run_id: str = "") -> list:
    response = await client.workflow_service.get_workflow_execution_history(
        GetWorkflowExecutionHistoryRequest(
            namespace="default", execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
        )
    )
    return list(response.history.events)


async def describe(client, workflow_id: str):
    return await client.workflow_service.describe_workflow_execution(
        DescribeWorkflowExecutionRequest(
            namespace="default", execution=WorkflowExecution(workflow_id=workflow_id)
        )
    )


async def assert_id_is_free_and_a_normal_start_works(client, workflow_id: str) -> None:
    """Nothing was half-written: the id names no run, and a plain start of it succeeds."""
    with pytest.raises(RPCError) as info:
        await describe(client, workflow_id)
    assert info.value.status == RPCStatusCode.NOT_FOUND
    started = await client.workflow_service.start_workflow_execution(start_request(workflow_id=workflow_id))
    assert started.run_id


# --- starts: capped as Temporal caps them ------------------------------------------------------------


@pytest.mark.parametrize("value", [BIG, DURATION_MAX], ids=["1e12s", "duration-max"])
@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("workflow_execution_timeout", {"workflow_execution_timeout": CAP, "workflow_run_timeout": CAP}),
        ("workflow_run_timeout", {"workflow_run_timeout": CAP}),
        ("workflow_task_timeout", {"default_workflow_task_timeout": 120}),
        ("workflow_start_delay", {}),
    ],
)
async def test_huge_start_durations_are_capped_not_internal_errors(client, field, value, expected):
    request = start_request(**{field: Duration(seconds=value)})
    await client.workflow_service.start_workflow_execution(request)
    config = (await describe(client, request.workflow_id)).execution_config
    for name, seconds in expected.items():
        assert getattr(config, name).seconds == seconds, name
    first = (await history(client, request.workflow_id))[0].workflow_execution_started_event_attributes
    if field == "workflow_start_delay":
        assert first.first_workflow_task_backoff.seconds == CAP
    # The run is usable: it can be described, signalled and terminated like any other.
    await client.workflow_service.signal_workflow_execution(
        SignalWorkflowExecutionRequest(
            namespace="default",
            workflow_execution=WorkflowExecution(workflow_id=request.workflow_id),
            signal_name="s",
        )
    )


# --- requests refused at the edge ---------------------------------------------------------------------

RUN = str(uuid.uuid4())


def history_token(cursor: object) -> bytes:
    return base64.b64encode(json.dumps(cursor).encode())


def big_header() -> Header:
    return Header(fields={"h": Payload(data=b"x" * (3 * 1024 * 1024))})


@dataclass(frozen=True)
class Refusal:
    name: str
    call: Callable
    """(workflow service, id of a running run, a fresh workflow id) -> the call."""
    fragment: str


def on_run(build):
    return lambda ws, wid, new: build(ws, WorkflowExecution(workflow_id=wid))


REFUSALS = [
    # Starts: each refused start leaves its workflow id free (checked below).
    Refusal(
        "mixed-sign duration",
        lambda ws, wid, new: ws.start_workflow_execution(
            start_request(workflow_id=new, workflow_run_timeout=Duration(seconds=5, nanos=-1))
        ),
        "An invalid WorkflowRunTimeoutSeconds is set on request. cause: "
        "duration has seconds and nanos with different signs",
    ),
    Refusal(
        "NaN backoff coefficient",
        lambda ws, wid, new: ws.start_workflow_execution(
            start_request(workflow_id=new, retry_policy=RetryPolicy(backoff_coefficient=math.nan))
        ),
        "Invalid retry_policy.backoff_coefficient: nan is not a finite number.",
    ),
    Refusal(
        "infinite backoff coefficient",
        lambda ws, wid, new: ws.start_workflow_execution(
            start_request(workflow_id=new, retry_policy=RetryPolicy(backoff_coefficient=math.inf))
        ),
        "Invalid retry_policy.backoff_coefficient: inf is not a finite number.",
    ),
    Refusal(
        "3 MiB header on a start",
        lambda ws, wid, new: ws.start_workflow_execution(start_request(workflow_id=new, header=big_header())),
        "Header size exceeds limit. The header is 3145746 bytes; the limit is 2097152 bytes (2 MiB).",
    ),
    Refusal(
        "1 MiB identity on a start",
        lambda ws, wid, new: ws.start_workflow_execution(
            start_request(workflow_id=new, identity="i" * (1 << 20))
        ),
        "Identity length exceeds limit.",
    ),
    Refusal(
        "cron schedule with a start delay",
        lambda ws, wid, new: ws.start_workflow_execution(
            start_request(
                workflow_id=new, cron_schedule="* * * * *", workflow_start_delay=Duration(seconds=5)
            )
        ),
        "CronSchedule and WorkflowStartDelay may not be used together.",
    ),
    Refusal(
        "1001-character signal name on a signal-with-start",
        lambda ws, wid, new: ws.signal_with_start_workflow_execution(
            SignalWithStartWorkflowExecutionRequest(
                namespace="default",
                workflow_id=new,
                workflow_type=WorkflowType(name="W"),
                task_queue=TaskQueue(name="q"),
                signal_name="s" * 1001,
            )
        ),
        "signal name exceeds maximum allowed length (1001/1000)",
    ),
    Refusal(
        "NUL in a workflow id",  # INTERNAL on Postgres, accepted by `perdura dev`
        lambda ws, wid, new: ws.start_workflow_execution(start_request(workflow_id=new + "\x00")),
        "Invalid workflow_id: a string may not contain the NUL character (\\x00); Postgres cannot store it.",
    ),
    Refusal(
        "NUL in a task queue name",
        lambda ws, wid, new: ws.start_workflow_execution(
            start_request(workflow_id=new, task_queue=TaskQueue(name="q\x00"))
        ),
        "Invalid task_queue.name: a string may not contain the NUL character",
    ),
    Refusal(
        "NUL in a list query",
        lambda ws, wid, new: ws.list_workflow_executions(
            ListWorkflowExecutionsRequest(namespace="default", query="WorkflowId = 'a\x00'")
        ),
        "Invalid query: a string may not contain the NUL character",
    ),
    # Requests against a running run: its history must not change (checked below).
    Refusal(
        "1 MiB signal name",
        on_run(
            lambda ws, ex: ws.signal_workflow_execution(
                SignalWorkflowExecutionRequest(
                    namespace="default", workflow_execution=ex, signal_name="s" * (1 << 20)
                )
            )
        ),
        "SignalName length exceeds limit.",
    ),
    Refusal(
        "1 MiB identity on a signal",
        on_run(
            lambda ws, ex: ws.signal_workflow_execution(
                SignalWorkflowExecutionRequest(
                    namespace="default", workflow_execution=ex, signal_name="s", identity="i" * (1 << 20)
                )
            )
        ),
        "Identity length exceeds limit.",
    ),
    Refusal(
        "NUL in a signal name",
        on_run(
            lambda ws, ex: ws.signal_workflow_execution(
                SignalWorkflowExecutionRequest(
                    namespace="default", workflow_execution=ex, signal_name="s\x00"
                )
            )
        ),
        "Invalid signal_name: a string may not contain the NUL character",
    ),
    Refusal(
        "3 MiB header on a signal",
        on_run(
            lambda ws, ex: ws.signal_workflow_execution(
                SignalWorkflowExecutionRequest(
                    namespace="default", workflow_execution=ex, signal_name="s", header=big_header()
                )
            )
        ),
        "Header size exceeds limit.",
    ),
    *(
        Refusal(
            f"history page token {label}",
            on_run(
                lambda ws, ex, token=token: ws.get_workflow_execution_history(
                    GetWorkflowExecutionHistoryRequest(
                        namespace="default", execution=ex, next_page_token=token
                    )
                )
            ),
            "Invalid NextPageToken.",
        )
        for label, token in [
            ("with an integer run id", history_token({"run": 5, "next": 3})),
            ("with a run id that is not a UUID", history_token({"run": "abc", "next": 3})),
            ("with a string event id", history_token({"run": RUN, "next": "3"})),
            ("with an event id past int64", history_token({"run": RUN, "next": 10**30})),
            ("that is a list", history_token([RUN, 3])),
        ]
    ),
    Refusal(
        "reverse history page token past int64",
        on_run(
            lambda ws, ex: ws.get_workflow_execution_history_reverse(
                GetWorkflowExecutionHistoryReverseRequest(
                    namespace="default", execution=ex, next_page_token=str(10**30).encode()
                )
            )
        ),
        "Invalid NextPageToken.",
    ),
    Refusal(
        "DescribeNamespace id that is not a UUID",
        lambda ws, wid, new: ws.describe_namespace(DescribeNamespaceRequest(id="not-a-uuid")),
        "Invalid namespace id 'not-a-uuid': it must be a UUID.",
    ),
    Refusal(
        "list query with an integer past int64",
        lambda ws, wid, new: ws.list_workflow_executions(
            ListWorkflowExecutionsRequest(
                namespace="default", query="HistoryLength > 99999999999999999999999"
            )
        ),
        "HistoryLength is out of the range of a 64-bit integer",
    ),
    Refusal(
        "count query with an integer past int64",
        lambda ws, wid, new: ws.count_workflow_executions(
            CountWorkflowExecutionsRequest(
                namespace="default", query="HistoryLength < -99999999999999999999999"
            )
        ),
        "out of the range of a 64-bit integer",
    ),
    *(
        Refusal(
            f"ListSchedules garbage token {token!r}",
            lambda ws, wid, new, token=token: ws.list_schedules(
                ListSchedulesRequest(namespace="default", next_page_token=token)
            ),
            "Invalid NextPageToken.",
        )
        for token in (b"abcd", b"garbage", base64.urlsafe_b64encode(b"some-schedule-id"))
    ),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c.name for c in REFUSALS])
async def test_bad_requests_are_refused_with_an_actionable_message(client, case):
    running = start_request()
    await client.workflow_service.start_workflow_execution(running)
    before = await history(client, running.workflow_id)
    fresh = f"wf-{uuid.uuid4()}"
    await expect(case.call(client.workflow_service, running.workflow_id, fresh), INVALID, case.fragment)
    # Nothing half-written: the running run's history is unchanged, a refused start left its id free.
    assert await history(client, running.workflow_id) == before
    await assert_id_is_free_and_a_normal_start_works(client, fresh)


# --- requests grpcio cannot decode, on every method -------------------------------------------------


def _methods() -> list[tuple[str, object]]:
    """(full method name, request class) of every WorkflowService and OperatorService method."""
    from google.protobuf import symbol_database

    db = symbol_database.Default()
    out = []
    for module in (workflow_service, operator_service):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                out.append((f"/{service.full_name}/{method.name}", db.GetSymbol(method.input_type.full_name)))
    return out


def _bad_utf8(request_class) -> bytes | None:
    """A request whose first string field holds invalid UTF-8, or None if it has no string field."""
    from google.protobuf.descriptor import FieldDescriptor

    for field in request_class.DESCRIPTOR.fields:
        if field.type == FieldDescriptor.TYPE_STRING:
            value = b"\xff\xfe bad utf-8"
            return bytes([(field.number << 3) | 2, len(value)]) + value if field.number < 16 else None
    return None


async def test_invalid_utf8_is_invalid_argument_on_every_method(server):
    """grpcio decodes before any handler and answered UNKNOWN; the real server answers INTERNAL."""
    tried = 0
    async with grpc.aio.insecure_channel(server.address) as channel:
        for method, request_class in _methods():
            body = _bad_utf8(request_class)
            if body is None:
                continue
            call = channel.unary_unary(
                method, request_serializer=lambda b: b, response_deserializer=lambda b: b
            )
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call(body, timeout=10)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, info.value.details())
            assert "must be valid UTF-8" in info.value.details(), method
            tried += 1
    assert tried > 100


@pytest.mark.parametrize("char", ["é", "%", "😀"])
async def test_a_message_quoting_long_non_ascii_input_fits_grpcios_trailer_limit(server, char):
    """The message quotes the version string, cut short. Cut by its UTF-8 length alone, 5,002 "é" made
    trailers past grpcio's 8 KiB limit (grpc-message escapes each byte as three), and a grpcio client saw
    RESOURCE_EXHAUSTED instead: the fuzz suite found it. The SDK's own client allows more, so this uses
    grpcio."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        # Between its soft and hard limits grpcio drops trailers at random: one call in ten at 8.9 KiB.
        for _ in range(50):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.DescribeWorkerDeploymentVersion(
                    rr.DescribeWorkerDeploymentVersionRequest(namespace="default", version=char * 5002),
                    timeout=10,
                )
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
            assert info.value.details().startswith("invalid version string")
            assert info.value.details().endswith("… (truncated)")


# --- failures nested too deep -------------------------------------------------------------------------


async def poll_workflow_task(client, task_queue: TaskQueue):
    poll = await client.workflow_service.poll_workflow_task_queue(
        PollWorkflowTaskQueueRequest(namespace="default", task_queue=task_queue, identity="test")
    )
    assert poll.task_token
    return poll


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field, by hand: Python's protobuf refuses to build what it cannot parse."""
    size, length = len(payload), b""
    while True:
        byte, size = size & 0x7F, size >> 7
        length += bytes([byte | (0x80 if size else 0)])
        if not size:
            return bytes([(number << 3) | 2]) + length + payload


def deep_failure_bytes(depth: int) -> bytes:
    """Failure (message 1, cause 4) nested `depth` deep, serialized."""
    failure = _field(1, b"leaf")
    for i in range(depth - 1):
        failure = _field(1, f"level {i}".encode()) + _field(4, failure)
    return failure


@pytest.mark.parametrize(
    ("depth", "fragment"),
    [
        (120, "must be valid UTF-8, and messages may nest at most 64 deep"),  # past protobuf's parser limit
        (99, "Request is nested more than 64 messages deep (at failure.cause"),  # the case
        (64, "Request is nested more than 64 messages deep (at failure.cause"),
    ],
)
async def test_a_failure_nested_too_deep_is_refused_and_the_history_stays_readable(
    server, client, depth, fragment
):
    """The real server stores a 99-deep one, then cannot read the history back (INTERNAL on every read)."""
    request = start_request()
    await client.workflow_service.start_workflow_execution(request)
    poll = await poll_workflow_task(client, request.task_queue)
    before = await history(client, request.workflow_id)
    failed = RespondWorkflowTaskFailedRequest(
        namespace="default", task_token=poll.task_token, identity="test"
    )
    body = failed.SerializeToString() + _field(3, deep_failure_bytes(depth))
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = channel.unary_unary(
            "/temporal.api.workflowservice.v1.WorkflowService/RespondWorkflowTaskFailed",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(body, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    assert fragment in info.value.details()
    assert await history(client, request.workflow_id) == before
    # One level less is stored, and the history (wrapped three levels deeper) still reads back.
    failed.failure.ParseFromString(deep_failure_bytes(63))
    await client.workflow_service.respond_workflow_task_failed(failed)
    types = [e.event_type for e in await history(client, request.workflow_id)]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED in types


# --- workflow commands ---------------------------------------------------------------------------------

TQ = TaskQueue(name="unused-activity-queue")


def timer(seconds: int, nanos: int = 0) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_START_TIMER,
        start_timer_command_attributes=StartTimerCommandAttributes(
            timer_id="t", start_to_fire_timeout=Duration(seconds=seconds, nanos=nanos)
        ),
    )


def activity(**fields) -> Command:
    fields.setdefault("start_to_close_timeout", Duration(seconds=10))
    return Command(
        command_type=CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
        schedule_activity_task_command_attributes=ScheduleActivityTaskCommandAttributes(
            activity_id="a", activity_type=ActivityType(name="x"), task_queue=TQ, **fields
        ),
    )


def child(**fields) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
        start_child_workflow_execution_command_attributes=StartChildWorkflowExecutionCommandAttributes(
            workflow_id=f"child-{uuid.uuid4()}", workflow_type=WorkflowType(name="C"), task_queue=TQ, **fields
        ),
    )


def complete() -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
        complete_workflow_execution_command_attributes=CompleteWorkflowExecutionCommandAttributes(),
    )


@dataclass(frozen=True)
class Capped:
    """The command is accepted; its event holds the capped values (as the real server's does)."""

    name: str
    command: Command
    event: int
    values: dict[str, int]
    then: int | None = None
    """An event the shard must write afterwards (proof that its queue computed with the value)."""


CAPPED = [
    Capped("timer 1e12 s", timer(BIG), EventType.EVENT_TYPE_TIMER_STARTED, {"start_to_fire_timeout": CAP}),
    Capped(
        "timer of Duration's maximum",
        timer(DURATION_MAX),
        EventType.EVENT_TYPE_TIMER_STARTED,
        {"start_to_fire_timeout": CAP},
    ),
    Capped(
        "timer with 2e9 nanos",
        timer(1, 2_000_000_000),
        EventType.EVENT_TYPE_TIMER_STARTED,
        {"start_to_fire_timeout": 3},
    ),
    Capped(
        "activity schedule-to-close 1e12 s",
        activity(schedule_to_close_timeout=Duration(seconds=BIG)),
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        {"schedule_to_close_timeout": CAP, "schedule_to_start_timeout": CAP},
    ),
    Capped(
        "activity schedule-to-start 1e12 s",
        activity(schedule_to_start_timeout=Duration(seconds=BIG)),
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        {"schedule_to_start_timeout": CAP},
    ),
    Capped(
        "activity start-to-close 1e12 s",
        activity(start_to_close_timeout=Duration(seconds=BIG)),
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        {"start_to_close_timeout": CAP},
    ),
    Capped(
        "child execution timeout 1e12 s",
        child(workflow_execution_timeout=Duration(seconds=BIG)),
        EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        {"workflow_execution_timeout": CAP, "workflow_run_timeout": CAP},
        then=EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
    ),
    Capped(
        "child run timeout of Duration's maximum",
        child(workflow_run_timeout=Duration(seconds=DURATION_MAX)),
        EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        {"workflow_run_timeout": CAP},
        then=EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
    ),
    Capped(
        "child task timeout 1e12 s",
        child(workflow_task_timeout=Duration(seconds=BIG)),
        EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        {"workflow_task_timeout": 120},
        then=EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
    ),
]


def _attributes(event):
    return getattr(event, event.WhichOneof("attributes"))


async def _wait_for_event(client, workflow_id: str, event_type: int, timeout: float = 20.0) -> list:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        events = await history(client, workflow_id)
        if any(e.event_type == event_type for e in events):
            return events
        assert asyncio.get_running_loop().time() < deadline, [EventType.Name(e.event_type) for e in events]
        await asyncio.sleep(0.2)


async def _respond(client, poll, *commands: Command):
    return await client.workflow_service.respond_workflow_task_completed(
        RespondWorkflowTaskCompletedRequest(
            namespace="default", task_token=poll.task_token, commands=list(commands), identity="test"
        )
    )


@pytest.mark.parametrize("case", CAPPED, ids=[c.name for c in CAPPED])
async def test_huge_command_durations_are_capped(client, case):
    request = start_request()
    await client.workflow_service.start_workflow_execution(request)
    await _respond(client, await poll_workflow_task(client, request.task_queue), case.command)
    events = await history(client, request.workflow_id)
    (event,) = [e for e in events if e.event_type == case.event]
    for field, seconds in case.values.items():
        assert getattr(_attributes(event), field).seconds == seconds, field
    if case.then is not None:
        # The child-start transfer computed its deadlines: before, it raised a date overflow on every attempt.
        await _wait_for_event(client, request.workflow_id, case.then)
    await client.workflow_service.signal_workflow_execution(
        SignalWorkflowExecutionRequest(
            namespace="default",
            workflow_execution=WorkflowExecution(workflow_id=request.workflow_id),
            signal_name="s",
        )
    )
    await _respond(client, await poll_workflow_task(client, request.task_queue), complete())
    assert (await describe(client, request.workflow_id)).workflow_execution_info.status == (
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED
    )


BAD_COMMANDS = [
    (
        "negative timer",
        timer(-5),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES,
        "An invalid StartToFireTimeout is set on StartTimerCommand: negative duration. TimerId=t",
    ),
    (
        "mixed-sign timer",
        timer(1, -5),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES,
        "An invalid StartToFireTimeout is set on StartTimerCommand: duration has seconds and nanos with "
        "different signs. TimerId=t",
    ),
    (
        "negative activity timeout",
        activity(start_to_close_timeout=Duration(seconds=-10)),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES,
        "invalid StartToCloseTimeout: negative duration",
    ),
    (
        "NaN activity backoff",
        activity(retry_policy=RetryPolicy(backoff_coefficient=math.nan)),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES,
        "RetryPolicy.backoff_coefficient must be a finite number",
    ),
    (
        "negative child execution timeout",
        child(workflow_execution_timeout=Duration(seconds=-1)),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_CHILD_EXECUTION_ATTRIBUTES,
        "Invalid WorkflowExecutionTimeout on StartChildWorkflowExecutionCommand: negative duration.",
    ),
    (
        "infinite child backoff",
        child(retry_policy=RetryPolicy(backoff_coefficient=math.inf)),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_CHILD_EXECUTION_ATTRIBUTES,
        "RetryPolicy.backoff_coefficient must be a finite number",
    ),
    (
        "negative continue-as-new backoff",
        Command(
            command_type=CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
            continue_as_new_workflow_execution_command_attributes=ContinueAsNewWorkflowExecutionCommandAttributes(
                workflow_type=WorkflowType(name="W"),
                task_queue=TQ,
                backoff_start_interval=Duration(seconds=-1),
            ),
        ),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_CONTINUE_AS_NEW_ATTRIBUTES,
        "Invalid BackoffStartInterval on ContinueAsNewWorkflowExecutionCommand: negative duration.",
    ),
    (
        "upsert without search attributes",
        Command(
            command_type=CommandType.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
            upsert_workflow_search_attributes_command_attributes={},
        ),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES,
        "SearchAttributes is not set on UpsertWorkflowSearchAttributesCommand.",
    ),
    (
        "modify properties without a memo",
        Command(
            command_type=CommandType.COMMAND_TYPE_MODIFY_WORKFLOW_PROPERTIES,
            modify_workflow_properties_command_attributes={"upserted_memo": {}},
        ),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_MODIFY_WORKFLOW_PROPERTIES_ATTRIBUTES,
        "UpsertedMemo.Fields is not set on ModifyWorkflowPropertiesCommand.",
    ),
    (
        "unknown command type",
        Command(command_type=999),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
        "unknown command type: 999",  # the real server's words (it answered INTERNAL here)
    ),
    (
        "1 MiB marker name",
        Command(
            command_type=CommandType.COMMAND_TYPE_RECORD_MARKER,
            record_marker_command_attributes=RecordMarkerCommandAttributes(marker_name="m" * (1 << 20)),
        ),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_RECORD_MARKER_ATTRIBUTES,
        "MarkerName on RecordMarkerCommand exceeds length limit.",
    ),
]


@pytest.mark.parametrize(
    ("command", "cause", "fragment"), [c[1:] for c in BAD_COMMANDS], ids=[c[0] for c in BAD_COMMANDS]
)
async def test_bad_commands_fail_the_workflow_task_with_their_cause(client, command, cause, fragment):
    """As the real server: the task fails with the cause, the RPC answers INVALID_ARGUMENT, the run goes on."""
    request = start_request()
    await client.workflow_service.start_workflow_execution(request)
    poll = await poll_workflow_task(client, request.task_queue)
    await expect(_respond(client, poll, command), INVALID, fragment)
    events = await history(client, request.workflow_id)
    failed = [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
    assert len(failed) == 1
    assert failed[0].workflow_task_failed_event_attributes.cause == cause
    assert fragment in failed[0].workflow_task_failed_event_attributes.failure.message
    # The run is healthy: its next workflow task completes it.
    await _respond(client, await poll_workflow_task(client, request.task_queue), complete())
    assert (await describe(client, request.workflow_id)).workflow_execution_info.status == (
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED
    )


async def test_an_activity_retry_interval_of_duration_max_leaves_the_timer_loop_healthy(client):
    """Its retry timer raised a date overflow on every pass, and no other timer fired after it."""
    request = start_request()
    await client.workflow_service.start_workflow_execution(request)
    poison = activity(
        start_to_close_timeout=Duration(seconds=1),
        retry_policy=RetryPolicy(initial_interval=Duration(seconds=DURATION_MAX)),
    )
    activity_queue = TaskQueue(name=f"acts-{uuid.uuid4()}")
    poison.schedule_activity_task_command_attributes.task_queue.CopyFrom(activity_queue)
    await _respond(client, await poll_workflow_task(client, request.task_queue), poison)
    task = await client.workflow_service.poll_activity_task_queue(
        PollActivityTaskQueueRequest(namespace="default", task_queue=activity_queue, identity="test")
    )
    assert task.task_token  # ... and never answered: the attempt times out after 1 s, and a retry is due
    await asyncio.sleep(2.5)
    other = start_request()
    await client.workflow_service.start_workflow_execution(other)
    await _respond(client, await poll_workflow_task(client, other.task_queue), timer(1))
    await _wait_for_event(client, other.workflow_id, EventType.EVENT_TYPE_TIMER_FIRED, timeout=15)
    pending = (await describe(client, request.workflow_id)).pending_activities
    assert [p.attempt for p in pending] == [2]


# --- schedules at the calendar's edges ----------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        {"interval": [{"interval": Duration(seconds=BIG)}]},  # capped to 100 years
        {"interval": [{"interval": Duration(seconds=CAP)}], "start_time": {"seconds": 253402300799 - 1000}},
        {"interval": [{"interval": Duration(seconds=1)}], "start_time": {"seconds": -62135596800}},
        {"interval": [{"interval": Duration(seconds=60)}], "jitter": Duration(seconds=DURATION_MAX)},
    ],
    ids=["interval-1e12s", "century-interval-from-9999", "start-on-0001-01-01", "jitter-duration-max"],
)
async def test_schedules_at_the_calendars_edges_are_served(client, spec):
    """Each was INTERNAL (a date overflow in CreateSchedule); the real server accepts them (it refuses an
    interval over 10,000 years, which the 100-year cap makes impossible here)."""
    from google.protobuf.timestamp_pb2 import Timestamp
    from temporalio.api.schedule.v1 import (
        BackfillRequest,
        Schedule,
        ScheduleAction,
        SchedulePatch,
        ScheduleSpec,
    )
    from temporalio.api.workflow.v1 import NewWorkflowExecutionInfo
    from temporalio.api.workflowservice.v1 import (
        CreateScheduleRequest,
        DeleteScheduleRequest,
        DescribeScheduleRequest,
        ListScheduleMatchingTimesRequest,
        PatchScheduleRequest,
    )

    schedule_id = f"edge-{uuid.uuid4()}"
    action = ScheduleAction(
        start_workflow=NewWorkflowExecutionInfo(
            workflow_id=f"edge-{uuid.uuid4()}", workflow_type=WorkflowType(name="W"), task_queue=TQ
        )
    )
    ws = client.workflow_service
    await ws.create_schedule(
        CreateScheduleRequest(
            namespace="default",
            schedule_id=schedule_id,
            schedule=Schedule(spec=ScheduleSpec(**spec), action=action),
            request_id=str(uuid.uuid4()),
        )
    )
    described = await ws.describe_schedule(
        DescribeScheduleRequest(namespace="default", schedule_id=schedule_id)
    )
    assert described.schedule.spec.interval[0].interval.seconds <= CAP
    await ws.list_schedule_matching_times(
        ListScheduleMatchingTimesRequest(
            namespace="default",
            schedule_id=schedule_id,
            start_time=Timestamp(seconds=-62135596800),
            end_time=Timestamp(seconds=253402300799),
        )
    )
    # A backfill over the whole calendar is taken too (it overflowed on its first instant).
    await ws.patch_schedule(
        PatchScheduleRequest(
            namespace="default",
            schedule_id=schedule_id,
            patch=SchedulePatch(
                backfill_request=[
                    BackfillRequest(
                        start_time=Timestamp(seconds=-62135596800), end_time=Timestamp(seconds=253402300799)
                    )
                ]
            ),
            request_id=str(uuid.uuid4()),
        )
    )
    await ws.describe_schedule(DescribeScheduleRequest(namespace="default", schedule_id=schedule_id))
    await ws.delete_schedule(DeleteScheduleRequest(namespace="default", schedule_id=schedule_id))


async def test_an_oversized_memo_in_a_command_is_refused(client):
    """ModifyWorkflowProperties' memo was not held to any limit. The real server fails the task and terminates
    the run ('ModifyWorkflowPropertiesCommandAttributes exceeds size limit.'); Perdura refuses the completion
    as it refuses every oversized payload of a command, and the run goes on."""
    from temporalio.api.common.v1 import Memo

    request = start_request()
    await client.workflow_service.start_workflow_execution(request)
    poll = await poll_workflow_task(client, request.task_queue)
    modify = Command(
        command_type=CommandType.COMMAND_TYPE_MODIFY_WORKFLOW_PROPERTIES,
        modify_workflow_properties_command_attributes={
            "upserted_memo": Memo(fields={"m": Payload(data=b"x" * (3 * 1024 * 1024))})
        },
    )
    before = await history(client, request.workflow_id)
    await expect(_respond(client, poll, modify), INVALID, "The upserted_memo is 3145746 bytes")
    assert await history(client, request.workflow_id) == before


# --- protocol messages ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"\xff\xff\xff", "the Acceptance message body could not be decoded"),
        (None, "Request is nested more than 64 messages deep"),
    ],
    ids=["undecodable-acceptance", "rejection-nested-too-deep"],
)
async def test_bad_protocol_messages_fail_the_workflow_task(client, body, fragment):
    """A message body is bytes to the edge's walk; undecodable it answered INTERNAL, too deep it was stored."""
    from google.protobuf import any_pb2
    from temporalio.api.protocol.v1 import Message
    from temporalio.api.update.v1 import Acceptance, Input, Meta, Rejection, Request, WaitPolicy
    from temporalio.api.update.v1 import Request as UpdateRequest
    from temporalio.api.workflowservice.v1 import UpdateWorkflowExecutionRequest

    request = start_request()
    ws = client.workflow_service
    await ws.start_workflow_execution(request)
    await _respond(client, await poll_workflow_task(client, request.task_queue))  # the first task, empty
    update_id = f"u-{uuid.uuid4()}"
    update = asyncio.ensure_future(
        ws.update_workflow_execution(
            UpdateWorkflowExecutionRequest(
                namespace="default",
                workflow_execution=WorkflowExecution(workflow_id=request.workflow_id),
                wait_policy=WaitPolicy(lifecycle_stage=2),  # ACCEPTED
                request=UpdateRequest(meta=Meta(update_id=update_id), input=Input(name="u")),
            )
        )
    )
    try:
        poll = await poll_workflow_task(client, request.task_queue)
        if body is None:
            packed = any_pb2.Any()
            packed.Pack(Rejection(rejected_request=Request(meta=Meta(update_id=update_id))))
            packed.value += _field(
                Rejection.DESCRIPTOR.fields_by_name["failure"].number, deep_failure_bytes(70)
            )
        else:
            packed = any_pb2.Any(
                type_url=f"type.googleapis.com/{Acceptance.DESCRIPTOR.full_name}", value=body
            )
        message = Message(id="m1", protocol_instance_id=update_id, body=packed)
        respond = ws.respond_workflow_task_completed(
            RespondWorkflowTaskCompletedRequest(
                namespace="default", task_token=poll.task_token, messages=[message], identity="test"
            )
        )
        await expect(respond, INVALID, fragment)
        events = await history(client, request.workflow_id)
        failed = [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
        assert [f.workflow_task_failed_event_attributes.cause for f in failed] == [
            Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE
        ]
    finally:
        update.cancel()
    # The run is healthy: a later task completes it.
    await _respond(client, await poll_workflow_task(client, request.task_queue), complete())
    assert (await describe(client, request.workflow_id)).workflow_execution_info.status == (
        WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED
    )


async def test_a_hundred_children_with_a_1e12_s_timeout_all_start(client):
    """Issue 10, item 2: one task with 100 such commands was accepted, then each child-start transfer raised a
    date overflow on every pass, re-reading the same 100 rows forever. Capped at the edge, all 100 start."""
    request = start_request()
    await client.workflow_service.start_workflow_execution(request)
    children = [child(workflow_execution_timeout=Duration(seconds=BIG)) for _ in range(100)]
    await _respond(client, await poll_workflow_task(client, request.task_queue), *children)
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        events = await history(client, request.workflow_id)
        started = [e for e in events if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED]
        if len(started) == 100:
            break
        assert asyncio.get_running_loop().time() < deadline, f"{len(started)} of 100 children started"
        await asyncio.sleep(0.5)
    initiated = [
        e.start_child_workflow_execution_initiated_event_attributes
        for e in events
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    assert {a.workflow_execution_timeout.seconds for a in initiated} == {CAP}
    await assert_id_is_free_and_a_normal_start_works(client, f"wf-{uuid.uuid4()}")
