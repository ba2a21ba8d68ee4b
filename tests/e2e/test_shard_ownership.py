"""Shard worker scale-out: the shard loops of two `perdura worker`s share the shards, and when one stops the
other takes its shards back within seconds; timers fire throughout (engine/shards/ownership.py). Their
lateness is measured apart, one test at a time (tests/e2e/test_timer_wakeups.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter

import psycopg
import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from tests.e2e.workflows import TimerWorkflow
from tests.support import servers

pytestmark = pytest.mark.timeout(180)
LEASE_SECONDS = 6  # the loops renew, and rebalance, every 2 s
SHARDS = 16


def holdings(database_url: str) -> Counter[str]:
    """Live leases per worker (its loops' names start with "host:supervisor-pid:worker")."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT owner FROM engine_shardlease WHERE owner <> '' AND expires_at > now()"
        ).fetchall()
    return Counter(owner.rsplit("/", 1)[0] for (owner,) in rows)


async def wait_for_holdings(database_url: str, wanted: list[int], timeout: float) -> Counter[str]:
    deadline = time.monotonic() + timeout
    while True:
        held = holdings(database_url)
        if sorted(held.values()) == wanted:
            return held
        if time.monotonic() > deadline:
            raise AssertionError(f"holdings {dict(held)} never became {wanted} within {timeout}s")
        await asyncio.sleep(0.2)


async def timers_fire(client: Client, queue: str) -> None:
    handles = [
        await client.start_workflow(TimerWorkflow.run, 0.5, id=f"own-{uuid.uuid4()}", task_queue=queue)
        for _ in range(4)
    ]
    assert [await h.result() for h in handles] == ["woke"] * 4


async def test_two_workers_share_the_shards_and_one_takes_all_back_when_the_other_stops(tmp_path):
    env = {"PERDURA_SHARD_LEASE_SECONDS": str(LEASE_SECONDS), "PERDURA_SWEEP_SECONDS": "30"}
    with servers.postgres_database(schema=True) as url, servers.production(tmp_path, url, env=env) as prod:
        client = await Client.connect(prod.address)
        queue = f"own-{uuid.uuid4()}"
        async with Worker(client, task_queue=queue, workflows=[TimerWorkflow]):
            (first,) = (await wait_for_holdings(url, [SHARDS], 10)).keys()
            await timers_fire(client, queue)

            second = prod.spawn("worker-b", ["worker", "--concurrency", "1"])
            servers.wait_for_log(" ready.", second, prod.logs["worker-b"])
            shared = await wait_for_holdings(url, [SHARDS // 2, SHARDS // 2], 3 * LEASE_SECONDS)
            assert first in shared
            await timers_fire(client, queue)

            # A stop lets the leases go at once: the first worker's loops take them at their next round,
            # not when the leases would have lapsed.
            stopped_at = time.monotonic()
            second.terminate()
            second.wait(timeout=15)
            back = await wait_for_holdings(url, [SHARDS], LEASE_SECONDS)
            taken_back_in = time.monotonic() - stopped_at
            assert list(back) == [first]
            await timers_fire(client, queue)
    print(
        f"shards shared 8/8 by two workers; one stopped, the other held all 16 again in {taken_back_in:.1f}s"
    )
