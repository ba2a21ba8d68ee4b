"""PERDURA_LOG_FORMAT=json: every line every process writes is one JSON object with the fields a log
pipeline indexes, the lines written while serving a gRPC call carry its namespace, method and request id,
a failed call's line its status code, and a canary string sent as a workflow's input, signal, activity
failure and result appears in no log at all."""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
import uuid

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e.log_workflows import CanaryWorkflow, echo
from tests.support import servers

FIELDS = {"time", "level", "logger", "message", "namespace", "method", "request_id", "trace_id"}
JSON_LOGS = {"PERDURA_LOG_FORMAT": "json"}


async def run_canary(address: str, canary: str) -> None:
    client = await Client.connect(address, namespace="default")
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[CanaryWorkflow], activities=[echo]):
        handle = await client.start_workflow(
            CanaryWorkflow.run, f"{canary}-input", id=f"logs-{uuid.uuid4()}", task_queue=queue
        )
        await handle.signal(CanaryWorkflow.reply, f"{canary}-signal")
        assert await handle.result() == f"echoed {canary}-input / {canary}-signal"
    # A call that fails, whose line must carry its status code.
    with pytest.raises(RPCError) as failed:
        await client.get_workflow_handle(f"missing-{uuid.uuid4()}").describe()
    assert failed.value.status == RPCStatusCode.NOT_FOUND


def fetch(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as e:
        return e.code


def parse(running: servers.Running) -> dict[str, list[dict]]:
    """Every process's log, each line parsed as JSON (failing on the first line that is not)."""
    parsed = {}
    for name, path in running.logs.items():
        lines = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                pytest.fail(f"{name} log line {number} is not JSON: {line!r}")
            assert isinstance(entry, dict), line
            assert entry.keys() >= FIELDS, f"{name} log line {number} lacks {FIELDS - entry.keys()}: {line}"
            assert (
                entry["trace_id"] == ""
            )  # traces are off (no OTLP endpoint); tests/e2e/test_traces.py has them on
            lines.append(entry)
        assert lines, f"{name} wrote no log line at all"
        parsed[name] = lines
    return parsed


def check(running: servers.Running, canary: str, api: str) -> dict[str, list[dict]]:
    running.stop()  # every line written, shutdown lines included
    parsed = parse(running)
    failed = [
        e for e in parsed[api] if e["method"] == "DescribeWorkflowExecution" and e.get("code") == "NOT_FOUND"
    ]
    assert len(failed) == 1, parsed[api]
    assert failed[0]["namespace"] == "default"
    assert failed[0]["request_id"]
    assert failed[0]["logger"] == "perdura.api.calls"
    for name, path in running.logs.items():
        assert canary not in path.read_text(), f"the canary is in the {name} log"
    return parsed


async def test_dev_server_logs_json_lines_without_payloads(tmp_path):
    canary = f"canary-{secrets.token_hex(8)}"
    port = servers.free_port()
    with servers.dev_server(tmp_path, extra=("--ui-port", str(port)), env=JSON_LOGS) as running:
        await run_canary(running.address, canary)
        assert fetch(f"http://127.0.0.1:{port}/readyz") == 200
        assert fetch(f"http://127.0.0.1:{port}/no-such-page") == 404
        parsed = check(running, canary, "dev")
    loggers = {e["logger"] for e in parsed["dev"]}
    assert {"perdura.dev", "perdura.api", "perdura.api.calls"} <= loggers, loggers


async def test_production_processes_log_json_lines_without_payloads(tmp_path):
    canary = f"canary-{secrets.token_hex(8)}"
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(tmp_path, url, env=JSON_LOGS) as running,
    ):
        running.env["PERDURA_SECRET_KEY"] = secrets.token_urlsafe(40)
        port = servers.free_port()
        web = running.spawn("web", ["web", "--ip", "127.0.0.1", "--port", str(port), "--workers", "2"])
        servers.wait_for_port(port, web, running.logs["web"])
        await run_canary(running.address, canary)
        assert fetch(f"http://127.0.0.1:{port}/readyz") == 200
        assert fetch(f"http://127.0.0.1:{port}/no-such-page") == 404
        parsed = check(running, canary, "api")
    assert set(parsed) == {"api", "worker", "beat", "web"}
    loggers = {name: {e["logger"] for e in lines} for name, lines in parsed.items()}
    assert "perdura.api" in loggers["api"]
    assert any(name.startswith("celery") for name in loggers["worker"]), loggers["worker"]
    assert any(name.startswith("celery") for name in loggers["beat"]), loggers["beat"]
    assert any(name.startswith("uvicorn") for name in loggers["web"]), loggers["web"]
    # Celery ran the timer the workflow slept on, and said so in JSON.
    assert any("succeeded" in e["message"] for e in parsed["worker"]), parsed["worker"]
