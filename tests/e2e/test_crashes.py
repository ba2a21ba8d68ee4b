"""Crashes lose nothing: a killed SDK worker, a killed API or shard worker, a restarted dev server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowUpdateStage

from tests.support import servers
from tests.support.crash_workflows import CrashWorkflow

WORKER = str(Path(__file__).resolve().parents[1] / "support" / "crash_worker.py")


def spawn_worker(address: str, task_queue: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, WORKER, address, task_queue], stdout=log.open("ab"), stderr=subprocess.STDOUT
    )


async def wait_for_line(path: Path, line: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and line in path.read_text().splitlines():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{line!r} never appeared in {path}")


def executions(path: Path) -> Counter:
    return Counter(line.split()[0] for line in path.read_text().splitlines())


async def test_worker_killed_during_an_activity(server, tmp_path):
    """The in-flight activity is retried on another worker after its timeout; completed ones never rerun."""
    client = await Client.connect(server.address)
    queue = f"crash-{uuid.uuid4()}"
    log = tmp_path / "activities.log"
    first = spawn_worker(server.address, queue, tmp_path / "w1.log")
    try:
        handle = await client.start_workflow(
            CrashWorkflow.run, args=[str(log), 0], id=f"crash-{uuid.uuid4()}", task_queue=queue
        )
        await wait_for_line(log, "b 1")
        first.kill()
        first.wait()
        second = spawn_worker(server.address, queue, tmp_path / "w2.log")
        try:
            result = await asyncio.wait_for(handle.result(), timeout=40)
        finally:
            second.kill()
            second.wait()
    finally:
        if first.poll() is None:
            first.kill()
    assert result == ["a", "b", "c"]
    counts = executions(log)
    assert counts["a"] == 1
    assert counts["c"] == 1
    assert 1 <= counts["b"] <= 2


@pytest.fixture
def private_production(tmp_path):
    """Production processes of their own, so killing them does not disturb other tests. A 5 s shard lease,
    not the default 30: the restarted worker takes the killed one's shards when its lease runs out."""
    env = {"PERDURA_SHARD_LEASE_SECONDS": "5"}
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(tmp_path, url, env=env) as running,
    ):
        yield running


async def test_api_and_shard_worker_killed_mid_run(private_production, tmp_path):
    """kill -9 of `perdura api` and of the Celery worker, then restart: signals, timers and results survive."""
    prod = private_production
    port = prod.address.rsplit(":", 1)[1]
    queue = f"crash-{uuid.uuid4()}"
    log = tmp_path / "activities.log"
    sdk_worker = spawn_worker(prod.address, queue, tmp_path / "sdk-worker.log")
    try:
        client = await Client.connect(prod.address)
        handle = await client.start_workflow(
            CrashWorkflow.run, args=[str(log), 3], id=f"crash-{uuid.uuid4()}", task_queue=queue
        )
        await handle.signal(CrashWorkflow.add, "s1")
        await wait_for_line(log, "b 1")

        prod.kill("api")
        prod.spawn("api", ["api", "--ip", "127.0.0.1", "--port", port])
        servers.wait_for_port(int(port), prod.processes["api"], prod.logs["api"])
        client = await Client.connect(prod.address)
        handle = client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
        await handle.signal(CrashWorkflow.add, "s2")

        # The shard worker dies while activity b's start-to-close timer is pending: a new one must fire it.
        prod.kill("worker")
        await handle.signal(CrashWorkflow.add, "s3")
        await asyncio.sleep(1)
        prod.spawn("worker", ["worker", "--concurrency", "2"])
        result = await asyncio.wait_for(handle.result(), timeout=60)
    finally:
        sdk_worker.kill()
        sdk_worker.wait()
    assert result == ["a", "b", "c", "s1", "s2", "s3"]
    assert executions(log)["c"] == 1


async def test_dev_server_restart_resumes_open_runs(tmp_path):
    """Stop `perdura dev` mid-run and start it on the same file: the run continues where it was."""
    port = servers.free_port()
    db = tmp_path / "dev.sqlite3"
    queue = f"restart-{uuid.uuid4()}"
    log = tmp_path / "activities.log"
    with servers.dev_server(tmp_path, db_file=db, port=port) as dev:
        client = await Client.connect(dev.address)
        handle = await client.start_workflow(
            CrashWorkflow.run, args=[str(log), 1], id=f"restart-{uuid.uuid4()}", task_queue=queue
        )
        sdk_worker = spawn_worker(dev.address, queue, tmp_path / "sdk-worker.log")
        await wait_for_line(log, "b 1")
        sdk_worker.kill()
        sdk_worker.wait()
    with servers.dev_server(tmp_path, db_file=db, port=port) as dev:
        sdk_worker = spawn_worker(dev.address, queue, tmp_path / "sdk-worker2.log")
        try:
            client = await Client.connect(dev.address)
            handle = client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
            await handle.signal(CrashWorkflow.add, "after-restart")
            assert await asyncio.wait_for(handle.result(), timeout=40) == ["a", "b", "c", "after-restart"]
        finally:
            sdk_worker.kill()
            sdk_worker.wait()


async def test_worker_killed_during_an_update_a_child_and_after_continue_as_new(dev_server, tmp_path):
    """Each stage runs an activity that hangs on its first attempt; the worker is killed there each time."""
    from tests.support.crash_workflows import CrashEverythingWorkflow

    client = await Client.connect(dev_server.address)
    queue = f"crash-{uuid.uuid4()}"
    log = tmp_path / "activities.log"
    workers = [spawn_worker(dev_server.address, queue, tmp_path / "w0.log")]
    try:
        handle = await client.start_workflow(
            CrashEverythingWorkflow.run, args=[str(log), 0], id=f"crash-{uuid.uuid4()}", task_queue=queue
        )
        update = await handle.start_update(
            CrashEverythingWorkflow.apply, str(log), wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        for stage, line in enumerate(("u 1", "child 1", "after-can 1")):
            await wait_for_line(log, line)
            workers[-1].kill()
            workers[-1].wait()
            workers.append(spawn_worker(dev_server.address, queue, tmp_path / f"w{stage + 1}.log"))
            if line == "u 1":
                assert await asyncio.wait_for(update.result(), timeout=40) == "u"
        assert await asyncio.wait_for(handle.result(), timeout=60) == "after-can (generation 1)"
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    counts = executions(log)
    assert counts == Counter({"u": 2, "child": 2, "after-can": 2})
