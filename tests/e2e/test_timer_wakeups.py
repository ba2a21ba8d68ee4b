"""Production timers fire on their wake-up hint, not on beat's sweep, and a broker outage costs only the hint.

`perdura api` sends a Celery message with an ETA for every user timer it commits. These tests run the
production processes with a 30-second sweep, so a timer that fires on time can only have been fired by
that message. Before the hints were bound to Perdura's Celery app they went to Celery's default broker
(amqp://localhost), no worker heard them, and every timer waited for the sweep.
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


async def test_user_timers_fire_on_their_hint_well_before_the_sweep(slow_sweep_server):
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


async def test_a_timer_further_than_two_sweeps_fires_on_the_wakeup_a_sweep_sends_ahead(
    one_second_sweep_server,
):
    """A timer due further than two sweeps away gets no wake-up when it is created (Redis would redeliver
    a message held past its visibility timeout); the sweep that finds it within two sweeps sends one with
    its ETA. Fired by the sweep itself, each would be up to a second late."""
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


def _worker_sessions(database_url: str) -> set[tuple[int, object]]:
    """The shard worker's open Postgres sessions (its processes name themselves, perdura/cli.py)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT pid, backend_start FROM pg_stat_activity "
            "WHERE application_name = 'perdura-worker' AND datname = current_database()"
        ).fetchall()
    return set(rows)


async def test_the_shard_worker_keeps_its_database_sessions_from_one_wakeup_to_the_next(slow_sweep_server):
    """Each wake-up is a Celery task, and Celery's Django fixup closed the pool process's connection after
    every task unless told to reuse it: each timer paid for a new Postgres session, a third of a busy
    pool's time. With a 30 s sweep, the tasks here are the timers' wake-ups."""
    client = await Client.connect(slow_sweep_server.address)
    queue = f"sessions-{uuid.uuid4()}"
    seen: set[tuple[int, object]] = set()
    async with Worker(client, task_queue=queue, workflows=[TimerWorkflow]):
        for _ in range(6):
            handle = await client.start_workflow(
                TimerWorkflow.run, 0.2, id=f"sessions-{uuid.uuid4()}", task_queue=queue
            )
            assert await handle.result() == "woke"
            seen |= _worker_sessions(slow_sweep_server.database_url)
    # Six wake-ups, served by the pool's two processes: at most a session each, and still open between
    # tasks (before, none was left open after a task).
    assert 1 <= len(seen) <= 2, seen
