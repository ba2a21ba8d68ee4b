"""Prometheus metrics of each process, scraped while an SDK workflow runs: requests, errors and latency per method
and namespace on the API's port; backlogs, timer lateness and parked rows on the shard worker's (both on
`perdura dev`'s); no label carrying a workflow id; and `/metrics` of the web app for the operator only."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from temporalio.api.workflowservice.v1 import CountWorkflowExecutionsRequest, DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e.conftest import new_id
from tests.e2e.workflows import HelloWorkflow, TimerWorkflow
from tests.support import servers


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def parse(text: str) -> list[Sample]:
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def scrape(port: int) -> list[Sample]:
    status, content_type, text = fetch(f"http://127.0.0.1:{port}/metrics")
    assert status == 200, text
    assert content_type.startswith("text/plain"), content_type
    return parse(text)


def matching(samples: Iterable[Sample], name: str, **labels: str) -> list[Sample]:
    return [s for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def total(samples: Iterable[Sample], name: str, **labels: str) -> float:
    return sum(s.value for s in matching(samples, name, **labels))


def processes(server: servers.Running) -> tuple[int, int]:
    """The metrics ports of (the API process, the shard worker): the same process in `perdura dev`."""
    if "dev" in server.metrics_ports:
        return server.metrics_ports["dev"], server.metrics_ports["dev"]
    return server.metrics_ports["api"], server.metrics_ports["worker"]


async def wait_for(check, timeout: float = 20.0):
    """Scrape until `check()` answers something true (series of other processes land a moment later)."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.3)


async def test_each_process_exports_request_backlog_and_timer_series(
    server, client: Client, worker, task_queue
):
    api_port, shard_port = processes(server)
    timer_id, hello_id, stuck_id = new_id("metrics-timer"), new_id("metrics-hello"), new_id("metrics-stuck")
    # A run on a queue nobody polls: its workflow task waits in the table, a backlog the gauges must show.
    idle_queue = f"tq-idle-{uuid.uuid4()}"
    await client.start_workflow(TimerWorkflow.run, 30.0, id=stuck_id, task_queue=idle_queue)
    timer = await client.start_workflow(TimerWorkflow.run, 1.0, id=timer_id, task_queue=task_queue)
    assert await client.execute_workflow(
        HelloWorkflow.run, "metrics", id=hello_id, task_queue=task_queue
    ) == ("hello metrics")
    with pytest.raises(RPCError) as missing:
        await client.get_workflow_handle("no-such-run-" + uuid.uuid4().hex).describe()
    assert missing.value.status is RPCStatusCode.NOT_FOUND

    # During the timer: the API's request series.
    api = scrape(api_port)
    starts = total(api, "perdura_grpc_requests_total", method="StartWorkflowExecution", namespace="default")
    assert starts >= 3
    latency = matching(
        api,
        "perdura_grpc_request_duration_seconds_count",
        method="StartWorkflowExecution",
        namespace="default",
    )
    assert latency
    assert latency[0].value >= 3
    started_sum = total(api, "perdura_grpc_request_duration_seconds_sum", method="StartWorkflowExecution")
    assert 0 < started_sum < 10 * latency[0].value, "a start takes milliseconds, not seconds"
    infinite = total(
        api,
        "perdura_grpc_request_duration_seconds_bucket",
        method="StartWorkflowExecution",
        namespace="default",
        le="+Inf",
    )
    assert infinite == latency[0].value
    # The server counts an error as the call unwinds, just after its status went out: the client may
    # scrape before that.
    deadline = time.monotonic() + 5
    while True:
        errors = total(
            api,
            "perdura_grpc_errors_total",
            method="DescribeWorkflowExecution",
            namespace="default",
            code="NOT_FOUND",
        )
        if errors >= 1 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
        api = scrape(api_port)
    assert errors >= 1
    assert total(api, "perdura_grpc_errors_total", method="StartWorkflowExecution", code="OK") == 0
    assert total(api, "perdura_tasks_matched_total", namespace="default", kind="workflow") >= 2
    assert total(api, "perdura_tasks_matched_total", namespace="default", kind="activity") >= 1
    # The workflow task after the activity goes to the worker's sticky queue with the events since its
    # last task, which this process wrote: they are sent from memory (engine/services/recent_events.py).
    assert total(api, "perdura_workflow_task_histories_total", source="memory") >= 1
    # The SDK worker's pollers wait between tasks.
    assert matching(api, "perdura_long_polls_waiting", namespace="default", kind="workflow")

    # The shard side: backlogs read at scrape time.
    shards = scrape(shard_port)
    stuck = matching(shards, "perdura_task_queue_backlog_tasks", namespace="default", task_queue=idle_queue)
    assert [(s.labels["kind"], s.value) for s in stuck] == [("workflow", 1.0)]
    age = matching(shards, "perdura_task_queue_backlog_age_seconds", task_queue=idle_queue)
    assert len(age) == 1
    assert 0 <= age[0].value < 120
    for name in (
        "perdura_timer_backlog_rows",
        "perdura_transfer_backlog_rows",
        "perdura_retention_backlog_rows",
        "perdura_archival_backlog_rows",
    ):
        rows = matching(shards, name)
        assert {s.labels["shard"] for s in rows} == {str(i) for i in range(16)}, name
        assert len(rows) == 16, name
        assert all(s.value >= 0 for s in rows), name
    parked = matching(shards, "perdura_parked_rows")
    assert {s.labels["queue"] for s in parked} == {
        "timer",
        "transfer",
        "visibility",
        "schedule",
        "retention",
        "batch",
        "reencryption",
    }
    assert total(shards, "perdura_parked_rows") == 0

    # After the timer fired: its lateness, observed by whichever process fired it.
    assert await timer.result() == "woke"

    def fired() -> list[Sample]:
        return [
            s for s in matching(scrape(shard_port), "perdura_timer_lateness_seconds_count") if s.value > 0
        ]

    counts = await wait_for(fired)
    assert counts, "no timer lateness was recorded after a timer fired"
    after = scrape(shard_port)
    lateness_count = total(after, "perdura_timer_lateness_seconds_count")
    lateness_sum = total(after, "perdura_timer_lateness_seconds_sum")
    assert lateness_count >= 1
    assert 0 <= lateness_sum / lateness_count < 10, "a healthy shard fires its timers within seconds"
    # Buckets are cumulative: the +Inf bucket holds them all, and the last finite one no more than that.
    shard = counts[0].labels["shard"]
    buckets = matching(after, "perdura_timer_lateness_seconds_bucket", shard=shard)
    assert buckets[-1].labels["le"] == "+Inf"
    assert buckets[-1].value == counts[0].value
    assert [b.value for b in buckets] == sorted(b.value for b in buckets)
    assert total(after, "perdura_shard_lease_acquisitions_total", shard=shard) >= 1
    assert total(after, "perdura_db_transaction_duration_seconds_count", fenced="true") >= 1

    # The metrics ports answer the probes of processes without a web port.
    for port in {api_port, shard_port}:
        status, _, text = fetch(f"http://127.0.0.1:{port}/healthz")
        assert (status, json.loads(text)) == (200, {"status": "ok"})
        status, _, text = fetch(f"http://127.0.0.1:{port}/readyz")
        assert status == 200, text
        checks = json.loads(text)["checks"]
        assert checks["database"] == checks["migrations"] == "ok", checks

    # No label value anywhere names a run.
    ids = (timer_id, hello_id, stuck_id)
    for sample in [*api, *shards, *after]:
        for value in sample.labels.values():
            assert not any(workflow_id in value for workflow_id in ids), sample


async def test_namespace_labels_can_be_switched_off(tmp_path):
    """With PERDURA_METRICS_NAMESPACE_LABELS=0 every namespace is recorded as "" (no namespace label)."""
    with servers.dev_server(tmp_path, env={"PERDURA_METRICS_NAMESPACE_LABELS": "0"}) as running:
        client = await Client.connect(running.address, namespace="default")
        await client.start_workflow(TimerWorkflow.run, 60.0, id=new_id(), task_queue="tq-unlabelled")
        samples = scrape(running.metrics_ports["dev"])
        starts = matching(samples, "perdura_grpc_requests_total", method="StartWorkflowExecution")
        assert [(s.labels["namespace"], s.value) for s in starts] == [("", 1.0)]
        backlog = matching(samples, "perdura_task_queue_backlog_tasks", task_queue="tq-unlabelled")
        assert [s.labels["namespace"] for s in backlog] == [""]


def test_production_api_processes_sum_on_one_metrics_port(tmp_path, production_server):
    """`perdura api --processes 2`: the supervisor's port sums what both children count."""
    port, metrics_port = servers.free_port(), servers.free_port()
    proc = production_server.spawn(
        "api-pair",
        [
            "api",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--processes",
            "2",
            "--metrics-port",
            str(metrics_port),
        ],
    )
    servers.wait_for_port(port, proc, production_server.logs["api-pair"])

    async def calls() -> None:
        # A fresh connection per call, so the kernel spreads them over both processes.
        for _ in range(12):
            client = await Client.connect(f"127.0.0.1:{port}", namespace="default")
            await client.count_workflows()

    asyncio.run(calls())
    status, _, text = fetch(f"http://127.0.0.1:{metrics_port}/readyz")
    assert status == 200, text
    samples = scrape(metrics_port)
    assert (
        total(samples, "perdura_grpc_requests_total", method="CountWorkflowExecutions", namespace="default")
        == 12
    )


def test_web_metrics_are_the_operators_only(tmp_path, production_server):
    token = secrets.token_urlsafe(24)
    env = dict(
        production_server.env, PERDURA_SECRET_KEY=secrets.token_urlsafe(40), PERDURA_METRICS_TOKEN=token
    )
    running = servers.Running(address="", env=env, database_url=production_server.database_url)
    port = servers.free_port()
    # Two uvicorn workers: whichever answers /metrics must sum both (the multiprocess directory).
    proc = running.spawn("web", ["web", "--ip", "127.0.0.1", "--port", str(port), "--workers", "2"])
    try:
        servers.wait_for_port(port, proc, running.logs["web"])
        base = f"http://127.0.0.1:{port}"
        # Loopback is not the operator in production, nor is a wrong token.
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"}):
            status, _, text = fetch(base + "/metrics", headers)
            assert status == 403, (headers, text)
            assert "PERDURA_METRICS_TOKEN" in text
        for _ in range(4):
            status, _, _ = fetch(
                base + "/api/v1/auth/me/", {"Authorization": "Bearer pdk_notakey_notasecret"}
            )
            assert status in (401, 403)
        status, content_type, text = fetch(base + "/metrics", {"Authorization": f"Bearer {token}"})
        assert status == 200, text
        assert content_type.startswith("text/plain"), content_type
        assert total(parse(text), "perdura_auth_failures_total", interface="rest", reason="invalid") == 4
    finally:
        running.stop()


async def test_dev_web_metrics_answer_the_loopback_operator(tmp_path):
    ui_port = servers.free_port()
    with servers.dev_server(tmp_path, extra=("--ui-port", str(ui_port))) as running:
        client = await Client.connect(running.address, namespace="default")
        await client.start_workflow(TimerWorkflow.run, 60.0, id=new_id(), task_queue="tq-none")
        deadline = time.monotonic() + 30
        while True:  # the web thread starts a moment after the gRPC port
            try:
                status, _, text = fetch(f"http://127.0.0.1:{ui_port}/metrics")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        assert status == 200, text
        samples = parse(text)
        # The same process's series as its metrics port: the gRPC calls and the engine's state.
        assert total(samples, "perdura_grpc_requests_total", method="StartWorkflowExecution") >= 1
        assert matching(samples, "perdura_timer_backlog_rows")
        # A browser that names another host (DNS rebinding) is not the operator.
        status, _, _ = fetch(f"http://127.0.0.1:{ui_port}/metrics", {"Host": "attacker.example"})
        assert status in (400, 403)


async def test_rate_limit_refusals_and_auth_failures_are_counted(tmp_path):
    """Each refused call counts once: rate-limit refusals per namespace and bucket, bad keys by reason."""
    with servers.dev_server(tmp_path, env={"PERDURA_RATE_VISIBILITY": "1"}) as running:
        client = await Client.connect(running.address, namespace="default")
        request = CountWorkflowExecutionsRequest(namespace="default")
        statuses = []
        for _ in range(8):
            try:
                await client.workflow_service.count_workflow_executions(request, retry=False)
                statuses.append(None)
            except RPCError as e:
                statuses.append(e.status)
        assert set(statuses) <= {None, RPCStatusCode.RESOURCE_EXHAUSTED}, statuses
        refused = statuses.count(RPCStatusCode.RESOURCE_EXHAUSTED)
        assert refused >= 5, "a bucket of one call a second refuses most of eight calls at once"
        with pytest.raises(RPCError) as bad_key:  # a method of another bucket, which has tokens left
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace="default"),
                retry=False,
                metadata={"authorization": "Bearer pdk_notakey_notasecret"},
            )
        assert bad_key.value.status is RPCStatusCode.UNAUTHENTICATED
        samples = scrape(running.metrics_ports["dev"])
        refusals = matching(samples, "perdura_rate_limit_refusals_total", namespace="default")
        assert [(s.labels["bucket"], s.value) for s in refusals] == [("visibility", float(refused))]
        assert total(samples, "perdura_auth_failures_total", interface="grpc", reason="invalid") == 1
        assert total(samples, "perdura_auth_failures_total", interface="grpc", reason="missing") == 0
        exhausted = total(
            samples,
            "perdura_grpc_errors_total",
            method="CountWorkflowExecutions",
            code="RESOURCE_EXHAUSTED",
        )
        assert exhausted == refused
