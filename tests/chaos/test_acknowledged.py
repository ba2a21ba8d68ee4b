"""Acknowledged operations lost (0 of N) across kill -9 of each process and a crash of Postgres.

Under a steady load of starts, signals and activity completions (the test completes each activity
through the client with the token the activity hands over, so it sees every acknowledgement), one
part fails and comes back: `perdura api`, the Celery shard worker, the SDK worker (kill -9 each), or
Postgres (`pg_ctl stop -m immediate`: every connection cut mid-transaction, nothing flushed but the
WAL). Afterwards every run is told to finish, and its history must hold every acknowledged start,
signal and completion exactly once, with the result the workflow computes from them.

Postgres is a private cluster (tests/support/private_services.py): never the machine's.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from tests.chaos.conftest import report, scaled
from tests.support import chaos_load, servers
from tests.support.private_services import private_postgres

WORKER = str(Path(__file__).resolve().parents[1] / "support" / "crash_worker.py")
RUNS = scaled(30, 300)
SIGNALS = 3
LOAD_SECONDS = scaled(5, 30)
DOWN_SECONDS = 1.5
# A killed shard worker's shards wait out its lease (no one else may take them before): 30 s by default,
# shorter here so the folder stays within its budget. A timer may be that late, never more (plus slack).
LEASE_SECONDS = 10

pytestmark = pytest.mark.timeout(scaled(90, 600))


@pytest.fixture(scope="module")
def cluster():
    with private_postgres() as pg:
        yield pg


class Stack:
    """The production processes on the private cluster, and an SDK worker process."""

    def __init__(self, prod: servers.Running, pg, tmp: Path, queue: str) -> None:
        self.prod, self.pg, self.tmp, self.queue = prod, pg, tmp, queue
        self.sdk: subprocess.Popen | None = None
        self.sdk_starts = 0

    async def spawn_sdk_worker(self) -> None:
        """Start an SDK worker process and wait until it polls (its imports take seconds here)."""
        self.sdk_starts += 1
        log = self.tmp / f"sdk-worker-{self.sdk_starts}.log"
        self.sdk = subprocess.Popen(
            [sys.executable, WORKER, self.prod.address, self.queue],
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while "worker ready" not in log.read_text():
            if self.sdk.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the SDK worker did not start:\n{log.read_text()[-2000:]}")
            await asyncio.sleep(0.1)

    def stop_sdk_worker(self) -> None:
        if self.sdk is not None and self.sdk.poll() is None:
            self.sdk.kill()
            self.sdk.wait()


async def kill_api(stack: Stack) -> None:
    port = int(stack.prod.address.rsplit(":", 1)[1])
    stack.prod.kill("api")
    await asyncio.sleep(DOWN_SECONDS)
    proc = stack.prod.spawn("api", ["api", "--ip", "127.0.0.1", "--port", str(port)])
    servers.wait_for_port(port, proc, stack.prod.logs["api"])


async def kill_shard_worker(stack: Stack) -> None:
    stack.prod.kill("worker")
    await asyncio.sleep(DOWN_SECONDS)
    stack.prod.spawn("worker", ["worker", "--concurrency", "2"])


async def kill_sdk_worker(stack: Stack) -> None:
    stack.stop_sdk_worker()
    await asyncio.sleep(DOWN_SECONDS)
    await stack.spawn_sdk_worker()


async def crash_postgres(stack: Stack) -> None:
    stack.pg.stop_immediate()
    await asyncio.sleep(DOWN_SECONDS)
    stack.pg.start()


FAULTS = {
    "kill-api": kill_api,
    "kill-shard-worker": kill_shard_worker,
    "kill-sdk-worker": kill_sdk_worker,
    "crash-postgres": crash_postgres,
}


@pytest.fixture(scope="module")
async def stack(cluster, tmp_path_factory: pytest.TempPathFactory):
    """One production stack and SDK worker for the four faults (each test puts back what it broke)."""
    tmp = tmp_path_factory.mktemp("stack")
    url = cluster.create_database(f"chaos_{uuid.uuid4().hex[:10]}")
    with servers.production(tmp, url, env={"PERDURA_SHARD_LEASE_SECONDS": str(LEASE_SECONDS)}) as prod:
        running = Stack(prod, cluster, tmp, f"chaos-{uuid.uuid4()}")
        await running.spawn_sdk_worker()
        try:
            yield running
        finally:
            running.stop_sdk_worker()


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_no_acknowledged_operation_is_lost(fault, stack, tmp_path):
    tokens = tmp_path / "tokens.txt"
    ledger = chaos_load.Ledger()
    api_log = stack.prod.logs["api"]
    incidents_before = api_log.read_text().count("internal error in")
    client = await Client.connect(stack.prod.address)
    stop = asyncio.Event()
    completer = asyncio.ensure_future(
        chaos_load.complete_activities(client, tokens=tokens, ledger=ledger, stop=stop)
    )
    load = asyncio.ensure_future(
        chaos_load.generate(
            client,
            queue=stack.queue,
            tokens=tokens,
            ledger=ledger,
            runs=RUNS,
            signals=SIGNALS,
            seconds=LOAD_SECONDS,
        )
    )
    await asyncio.sleep(LOAD_SECONDS / 3)
    began = time.monotonic()
    await FAULTS[fault](stack)
    recovered = time.monotonic() - began
    await load
    results = await chaos_load.finish_all(client, ledger, timeout=scaled(45, 300))
    stop.set()
    await completer
    audit = await chaos_load.audit(client, ledger, results)
    # A fault of another part is a reason to retry (UNAVAILABLE), never an internal error.
    incidents = api_log.read_text().count("internal error in") - incidents_before

    report(fault, f"{audit.summary(ledger)}; internal errors {incidents}; back after {recovered:.1f}s")
    assert audit.lost == []
    assert audit.duplicated == []
    assert audit.wrong_results == []
    assert incidents == 0
    assert max(audit.timer_lateness) < LEASE_SECONDS + 5
    assert len(ledger.started) > RUNS // 2
