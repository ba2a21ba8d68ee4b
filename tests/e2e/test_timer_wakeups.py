"""Production timers fire on time, by the shard loops of `perdura worker`, not by beat's sweep.

Each worker's shard loops hold their shards and sleep until the next timer in them is due (engine/shards/
loop.py). These tests run the production processes with a 30-second sweep, so a timer that fires on time
can only have been fired by a loop. (Before the loops, each timer's wake-up was a Celery message with an
ETA; before those were bound to Perdura's Celery app they went to Celery's default broker, no worker heard
them, and every timer waited for the sweep.)
"""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from tests.e2e.workflows import TimerWorkflow
from tests.support import servers

pytestmark = pytest.mark.timeout(180)
SWEEP_SECONDS = 30


@pytest.fixture(scope="module")
def slow_sweep_server(tmp_path_factory: pytest.TempPathFactory):
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(
            tmp_path_factory.mktemp("wakeups"), url, env={"PERDURA_SWEEP_SECONDS": str(SWEEP_SECONDS)}
        ) as running,
    ):
        yield running


async def _lateness(handle) -> float:
    """Seconds between the timer's due time and its TimerFired event, from the history."""
    started = fired = None
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            due = event.event_time.ToDatetime() + (
                event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
            )
            started = due
        elif event.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
            fired = event.event_time.ToDatetime()
    assert started is not None
    assert fired is not None
    return (fired - started).total_seconds()


async def test_user_timers_fire_on_time_well_before_the_sweep(slow_sweep_server):
    client = await Client.connect(slow_sweep_server.address)
    queue = f"wakeups-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[TimerWorkflow]):
        # Due times spread over 6 s: one sweep could fire at most one of them near its due time.
        handles = []
        for _ in range(5):
            handles.append(
                await client.start_workflow(
                    TimerWorkflow.run, 1.0, id=f"wake-{uuid.uuid4()}", task_queue=queue
                )
            )
            await asyncio.sleep(1.5)
        for handle in handles:
            assert await handle.result() == "woke"
        late = sorted([await _lateness(h) for h in handles])
    print(f"timer lateness with a {SWEEP_SECONDS}s sweep: {', '.join(f'{s:.3f}' for s in late)} s")
    assert late[-1] < 1.0, late


@pytest.fixture(scope="module")
def one_second_sweep_server(tmp_path_factory: pytest.TempPathFactory):
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(
            tmp_path_factory.mktemp("ahead"), url, env={"PERDURA_SWEEP_SECONDS": "1"}
        ) as running,
    ):
        yield running


async def test_timers_due_seconds_later_fire_on_time_too(
    one_second_sweep_server,
):
    """Timers due a few seconds after they start, past the loop's longest sleep (a second): the loop
    finds each on a later look and sleeps until it is due. Fired by the sweep, each would be up to a
    second late."""
    client = await Client.connect(one_second_sweep_server.address)
    queue = f"ahead-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[TimerWorkflow]):
        handles = [
            await client.start_workflow(
                TimerWorkflow.run, seconds, id=f"ahead-{uuid.uuid4()}", task_queue=queue
            )
            for seconds in (4.1, 4.5, 5.3, 6.7)
        ]
        for handle in handles:
            assert await handle.result() == "woke"
        late = sorted([await _lateness(h) for h in handles])
    print(f"timer lateness with a 1s sweep, timers 4-7 s: {', '.join(f'{s:.3f}' for s in late)} s")
    assert late[-1] < 0.3, late


def _celery_sessions(database_url: str) -> set[tuple[int, object]]:
    """The Celery worker's open Postgres sessions (each process names its own, perdura/cli.py; the shard
    loops' are perdura-worker-shards)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT pid, backend_start FROM pg_stat_activity "
            "WHERE application_name = 'perdura-worker' AND datname = current_database()"
        ).fetchall()
    return set(rows)


async def test_the_celery_worker_keeps_its_database_sessions_from_one_task_to_the_next(
    one_second_sweep_server,
):
    """Celery's Django fixup closed a pool process's connection after every task unless told to reuse it:
    each task paid for a new Postgres session, a third of a busy pool's time. Here the tasks are beat's
    sweeps, one a second."""
    seen: list[set[tuple[int, object]]] = []
    for _ in range(8):
        await asyncio.sleep(0.5)
        seen.append(_celery_sessions(one_second_sweep_server.database_url))
    # Sessions kept between tasks: the same ones, in most looks, across four sweeps (before, a session
    # lived for one task, a few milliseconds, and no look found the same one twice).
    kept = set.intersection(*[s for s in seen if s] or [set()])
    assert sum(1 for s in seen if s) >= 6, seen
    assert kept, seen
    assert len(set.union(*seen)) <= 2, seen
