"""Timers lost and early fires (0) with a storm of timers due in the same second and Redis restarted.

Redis is the Celery broker (the sweep's messages) and carries the console's live hints; the shard loops
that fire timers need only Postgres. Killing Redis as the storm comes due must cost no timer: every due
row fires once, none twice or before its time, whatever Celery's worker does meanwhile (its transport
exits on broker loss; `perdura worker` starts it again).
"""

from __future__ import annotations

import asyncio
import math
import time

import psycopg
import pytest
from temporalio.client import Client

from tests.chaos.conftest import report, scaled
from tests.support import servers
from tests.support.private_services import private_redis
from tests.support.raw_timers import audit_timers, start_timer_runs

RUNS = scaled(10, 100)
TIMERS_PER_RUN = scaled(500, 1000)

pytestmark = pytest.mark.timeout(scaled(100, 1800))


def pending_timers(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT count(*) FROM engine_timer WHERE kind = 1").fetchone()[0]


async def test_timer_storm_survives_a_redis_restart(tmp_path):
    total = RUNS * TIMERS_PER_RUN
    with (
        private_redis(tmp_path) as broker,
        servers.postgres_database(schema=True) as url,
        servers.production(tmp_path, url, redis_url=broker.url) as prod,
    ):
        client = await Client.connect(prod.address)
        # Room to create them all first (over 1,000 timers a second here), then all due in one second.
        due_at = math.ceil(time.time() + 5 + total / 1000)
        ids = await start_timer_runs(client, runs=RUNS, timers_per_run=TIMERS_PER_RUN, due_at=due_at)
        created = time.time()
        assert created < due_at - 1, f"creating {total} timers took until {created - due_at:+.1f}s of due"
        assert pending_timers(url) == total

        # Redis dies a second before they are due and comes back two seconds after.
        await asyncio.sleep(due_at - 1 - time.time())
        broker.kill()
        await asyncio.sleep(due_at + 2 - time.time())
        broker.start()

        deadline = time.monotonic() + scaled(60, 1500)
        while True:
            left = pending_timers(url)
            if not left or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        drained = time.time() - due_at
        audit = await audit_timers(client, ids)

    report(
        "timer-storm-redis-restart",
        f"{total} timers due in one second, Redis killed at due-1s and back at due+2s: {audit.summary()}; "
        f"all fired {drained:.1f}s after due",
    )
    assert left == 0, f"{left} timers still pending"
    assert audit.started == total
    assert (audit.lost, audit.duplicated, audit.early) == (0, 0, 0)
    assert audit.fired == total
