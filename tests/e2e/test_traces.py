"""OpenTelemetry traces: with OTEL_EXPORTER_OTLP_ENDPOINT set, each RPC is a server span continuing the SDK's span
(through the `_tracer-data` Temporal header the SDK's TracingInterceptor sends), each shard pass a span of
its own, exported by OTLP to a collector; the call's log lines carry its trace id. The collector here is an
OTLP TraceService served in the test process from OpenTelemetry's own protocol definitions."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
import time
from concurrent import futures

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e.conftest import new_id
from tests.e2e.workflows import ALL_ACTIVITIES, ALL_WORKFLOWS, TimerWorkflow
from tests.support import servers


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP trace receiver: keeps every span it is sent, with its resource's service name."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, object]] = []
        self.lock = threading.Lock()

    def Export(self, request, context):  # noqa: N802 - the generated servicer's name
        with self.lock:
            for resource_spans in request.resource_spans:
                service = next(
                    (
                        a.value.string_value
                        for a in resource_spans.resource.attributes
                        if a.key == "service.name"
                    ),
                    "",
                )
                for scope in resource_spans.scope_spans:
                    self.spans.extend((service, span) for span in scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()

    def named(self, name: str) -> list[tuple[str, object]]:
        with self.lock:
            return [(service, span) for service, span in self.spans if span.name == name]


@pytest.fixture
def collector():
    received = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(received, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield received, port
    finally:
        server.stop(grace=None)


def attribute(span, key: str):
    for a in span.attributes:
        if a.key == key:
            value = a.value
            return getattr(value, value.WhichOneof("value"))
    return None


async def wait_for(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)


OTEL_ENV = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
"""Batches leave every 100 ms instead of every 5 s."""


@pytest.mark.parametrize("mode", ["dev", "production"])
async def test_rpc_and_shard_spans_continue_the_sdks_trace(tmp_path, collector, mode):
    received, port = collector
    env = {
        **OTEL_ENV,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "PERDURA_LOG_FORMAT": "json",
    }
    sdk_spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(sdk_spans))
    interceptor = TracingInterceptor(provider.get_tracer("test"))
    with contextlib.ExitStack() as stack:
        if mode == "dev":
            running = stack.enter_context(servers.dev_server(tmp_path, env=env))
            api_log, shard_services = "dev", {"perdura-dev"}
        else:
            database = stack.enter_context(servers.postgres_database(schema=True))
            running = stack.enter_context(servers.production(tmp_path, database, env=env))
            api_log, shard_services = "api", {"perdura-worker"}
        client = await Client.connect(running.address, namespace="default", interceptors=[interceptor])
        task_queue = f"tq-traces-{new_id()}"
        workflow_id = new_id("traced")
        async with Worker(client, task_queue=task_queue, workflows=ALL_WORKFLOWS, activities=ALL_ACTIVITIES):
            assert (
                await client.execute_workflow(TimerWorkflow.run, 0.5, id=workflow_id, task_queue=task_queue)
                == "woke"
            )

        (start,) = [s for s in sdk_spans.get_finished_spans() if s.name == "StartWorkflow:TimerWorkflow"]
        starts = await wait_for(
            lambda: received.named("temporal.api.workflowservice.v1.WorkflowService/StartWorkflowExecution")
        )
        assert starts, "the server exported no span of StartWorkflowExecution"
        ((service, server_span),) = starts
        assert service == ("perdura-dev" if mode == "dev" else "perdura-api")
        # The server's span is the SDK span's child: same trace, the SDK span as its parent.
        assert server_span.trace_id == start.context.trace_id.to_bytes(16, "big")
        assert server_span.parent_span_id == start.context.span_id.to_bytes(8, "big")
        assert server_span.kind == server_span.SPAN_KIND_SERVER
        assert attribute(server_span, "perdura.namespace") == "default"
        assert attribute(server_span, "rpc.grpc.status_code") == 0
        # Polls carry no SDK header: their spans start traces of their own, still exported.
        assert await wait_for(
            lambda: received.named("temporal.api.workflowservice.v1.WorkflowService/PollWorkflowTaskQueue")
        )

        # The timer was fired by a shard pass: a span of the process that fired it.
        shard_passes = await wait_for(
            lambda: [
                span
                for service, span in received.named("perdura.shard.process")
                if service in shard_services and attribute(span, "perdura.rows")
            ]
        )
        assert shard_passes, "no shard pass span with work done was exported"
        assert attribute(shard_passes[0], "perdura.lease_held") is True

        # A caller that sends W3C trace context in the gRPC metadata: the call's span continues it, and
        # the call's log line (a NOT_FOUND answer) carries its trace id.
        trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
        with pytest.raises(RPCError) as missing:
            await client.workflow_service.describe_workflow_execution(
                DescribeWorkflowExecutionRequest(
                    namespace="default", execution=WorkflowExecution(workflow_id=new_id("missing"))
                ),
                metadata={"traceparent": f"00-{trace_id}-{parent_id}-01"},
            )
        assert missing.value.status is RPCStatusCode.NOT_FOUND
        describes = await wait_for(
            lambda: received.named(
                "temporal.api.workflowservice.v1.WorkflowService/DescribeWorkflowExecution"
            )
        )
        ((_, describe),) = describes
        assert describe.trace_id.hex() == trace_id
        assert describe.parent_span_id.hex() == parent_id
        assert describe.status.code == describe.status.STATUS_CODE_ERROR
        assert describe.status.message == "NOT_FOUND"
        lines = [
            json.loads(line)
            for line in running.logs[api_log].read_text().splitlines()
            if line.startswith("{")
        ]
        answered = [
            line for line in lines if line.get("method") == "DescribeWorkflowExecution" and line.get("code")
        ]
        assert [line["trace_id"] for line in answered] == [trace_id]
        # No payload in any span: the workflow's argument and result appear nowhere.
        with received.lock:
            exported = b"".join(span.SerializeToString() for _, span in received.spans)
        assert b"woke" not in exported
