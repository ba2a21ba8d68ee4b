"""`perdura api --processes N`: N API processes share one port, the kernel spreads connections over them,
and one that dies is started again while the others keep serving."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from tests.e2e.workflows import SequenceWorkflow, TimerWorkflow, add_one
from tests.support import servers

pytestmark = pytest.mark.timeout(120)


def _children(pid: int) -> set[int]:
    """The child processes of `pid` (Linux: every thread of the supervisor may have started some)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.update(int(p) for p in (task / "children").read_text().split())
    return found


def _wait_for(predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s")


def _exited(pid: int) -> bool:
    """True once `pid` has exited (gone, or a zombie its parent has not reaped yet): its listening socket is
    closed then. Until that moment the kernel may still hash a new connection to it, and the connection is
    reset when the socket closes, so the test waits for the exit before it connects."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or reaped between open and read
        return True
    return any(line.startswith("State:") and "Z" in line.split()[1] for line in status.splitlines())


def _serving(log: Path) -> int:
    return log.read_text(errors="replace").count("Perdura API on")


async def test_two_api_processes_share_a_port_and_one_that_dies_comes_back(tmp_path):
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(tmp_path, url, api_args=("--processes", "2")) as running,
    ):
        supervisor = running.processes["api"]
        log = running.logs["api"]
        # Both bound the one port: a child that could not would exit and never announce itself.
        _wait_for(lambda: _serving(log) >= 2)
        first = _wait_for(lambda: len(c := _children(supervisor.pid)) == 2 and c)

        client = await Client.connect(running.address)
        queue = f"procs-{uuid.uuid4()}"
        async with Worker(client, task_queue=queue, workflows=[TimerWorkflow]):
            handle = await client.start_workflow(
                TimerWorkflow.run, 0.1, id=f"procs-{uuid.uuid4()}", task_queue=queue
            )
            assert await handle.result() == "woke"

        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        _wait_for(lambda: _exited(victim), timeout=10)
        # While it is down, new connections land on its sibling. The first one may still be reset (seen on
        # this machine once per kill, after the victim had exited: the kernel's reuseport group drops it),
        # so each connect is retried as a client behind a restarting server would; more than one reset
        # per kill would mean connections keep landing on the dead socket.
        resets = 0
        for _ in range(5):
            for _attempt in range(3):
                try:
                    fresh = await Client.connect(running.address)
                    await fresh.count_workflows()
                    break
                except RuntimeError:
                    resets += 1
                    await asyncio.sleep(0.2)
            else:
                raise AssertionError("no connection reached the surviving API process")
        assert resets <= 1
        replaced = _wait_for(lambda: len(c := _children(supervisor.pid)) == 2 and victim not in c and c)
        assert replaced & first == first - {victim}
        _wait_for(lambda: _serving(log) >= 3)
        assert "an API process exited" in log.read_text(errors="replace")

        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=15) is not None
        # The supervisor waited for its children: none is left behind, serving or orphaned.
        assert not [pid for pid in replaced if Path(f"/proc/{pid}").exists()]


async def test_a_busy_api_process_stops_within_10_s_of_sigterm_and_no_task_is_lost(tmp_path):
    """SIGTERM to one of two API processes while SDK workers run workflows through them: it stops within
    10 s (its long polls answered, its calls finished), the SDK's connections move to its sibling, the
    supervisor starts it again, and every workflow completes with its result."""
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(tmp_path, url, api_args=("--processes", "2")) as running,
    ):
        supervisor = running.processes["api"]
        log = running.logs["api"]
        _wait_for(lambda: _serving(log) >= 2)
        first = _wait_for(lambda: len(c := _children(supervisor.pid)) == 2 and c)

        queue = f"sigterm-{uuid.uuid4()}"
        # Several clients, so connections (and the SDK's long polls) land on both processes.
        clients = [await Client.connect(running.address) for _ in range(4)]
        workers = [
            Worker(c, task_queue=queue, workflows=[SequenceWorkflow], activities=[add_one]) for c in clients
        ]
        async with contextlib.AsyncExitStack() as stack:
            for worker in workers:
                await stack.enter_async_context(worker)
            handles = [
                await clients[i % len(clients)].start_workflow(
                    SequenceWorkflow.run, 20, id=f"sigterm-{i}-{uuid.uuid4()}", task_queue=queue
                )
                for i in range(40)
            ]
            await asyncio.sleep(0.5)  # the workflows are under way: polls waiting, activities in flight
            victim = min(first)
            began = time.monotonic()
            os.kill(victim, signal.SIGTERM)
            await asyncio.to_thread(_wait_for, lambda: _exited(victim), 10)
            stopped = time.monotonic() - began
            results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 90)
        assert results == [20] * 40
        assert stopped <= 10, stopped
        # The supervisor started a new process in its place.
        _wait_for(lambda: len(c := _children(supervisor.pid)) == 2 and victim not in c and c)
        print(f"\nSIGTERM: the API process stopped in {stopped:.1f} s; 40 of 40 workflows completed")
