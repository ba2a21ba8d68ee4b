"""A poison row stalls nothing but itself (issue 10, "Found" 2), through the official SDK against a running
server: `perdura dev` (SQLite) and the production processes (Postgres, Celery).

One namespace's shard rows are made to fail in the database itself, whatever the edge accepts: timers on
a run whose state cannot be decrypted (in every shard), a timer of an unknown kind, 100 transfers whose
sealed details cannot be opened (a full batch in one shard: the batch the old code re-read forever) and
a schedule whose record is corrupt. Meanwhile another namespace's workflows sleep and start children;
their timers must fire on time. The bad rows end parked (`perdura shards parked`), `redrive` brings them
back, and every process stops within 10 s of SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import statistics
import time
import uuid
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, PollWorkflowTaskQueueRequest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
)
from temporalio.worker import Worker

from tests.e2e import poison_workflows as pw
from tests.support import servers

SHARDS = 16
POISON_TRANSFERS = 100
MAX_ATTEMPTS = 3
LATENESS_BOUND = 1.0
SLACK = 2.0
"""A healthy timer may fire as late as the latest before the poison (at least 1 s: dev fires on time,
the Celery workers about a second late on this machine), plus SLACK for a 2-core machine shared with
other work. A stall (the old code) never fires them at all: the round times out after a minute."""


@pytest.fixture(params=["dev", "postgres"], scope="module")
def poisoned(request, tmp_path_factory):
    """A server of its own (its rows get corrupted), parking after 3 attempts."""
    env = {"PERDURA_SHARD_MAX_ATTEMPTS": str(MAX_ATTEMPTS)}
    tmp = tmp_path_factory.mktemp(f"poison-{request.param}")
    if request.param == "dev":
        with servers.dev_server(tmp, env=env) as running:
            yield running
    else:
        with servers.postgres_database(schema=True) as url, servers.production(tmp, url, env=env) as running:
            yield running


class Db:
    """Direct access to the server's database, to plant rows no request could create."""

    def __init__(self, running: servers.Running) -> None:
        self.sqlite = running.db_file if not running.database_url else None
        self.url = running.database_url

    def run(self, sql: str, params: tuple = ()) -> list[tuple]:
        if self.sqlite is not None:
            with contextlib.closing(sqlite3.connect(self.sqlite, timeout=30)) as db:
                rows = db.execute(sql.replace("%s", "?"), params).fetchall()
                db.commit()
                return rows
        with psycopg.connect(self.url, autocommit=True) as db:
            cursor = db.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def time(self, value: datetime) -> object:
        # Django keeps SQLite datetimes as naive UTC text.
        if self.sqlite is not None:
            return value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        return value


async def parked(running: servers.Running, namespace: str) -> list[dict]:
    out = await asyncio.to_thread(running.cli, "shards", "parked", "--namespace", namespace, "--json")
    return [json.loads(line) for line in out.splitlines()]


async def wait_parked(
    running: servers.Running, namespace: str, count: int, timeout: float = 60
) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        rows = await parked(running, namespace)
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        await asyncio.sleep(0.5)


async def timer_lateness(handle) -> list[float]:
    """For each timer of the run: seconds between when it was due and when it fired (from its history)."""
    started: dict[int, float] = {}
    late: list[float] = []
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            due = e.event_time.ToDatetime().timestamp()
            due += e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds()
            started[e.event_id] = due
        elif e.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
            fired = e.event_time.ToDatetime().timestamp()
            late.append(fired - started[e.timer_fired_event_attributes.started_event_id])
    return late


async def namespace_id(client: Client, name: str) -> str:
    answer = await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=name))
    return answer.namespace_info.id


def ids_in_shard(ns_id: str, shard: int, n: int, prefix: str) -> list[str]:
    """Workflow ids that hash to `shard` (engine.ids.shard_for), so the healthy runs share the poison's
    shards whatever order the old code processed shards in."""
    found = []
    while len(found) < n:
        wid = f"{prefix}-{uuid.uuid4()}"
        if zlib.crc32(f"{ns_id}/{wid}".encode()) % SHARDS == shard:
            found.append(wid)
    return found


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


async def healthy_round(
    running: servers.Running, client: Client, ns_id: str, shards: tuple[int, ...], label: str
) -> list[float]:
    """Runs of the healthy namespace in `shards`, each sleeping 1 s three times and then running a child
    that sleeps 0.5 s: all must finish within a minute. Returns every timer's lateness."""
    task_queue = f"tq-{uuid.uuid4()}"
    wids = [wid for shard in shards for wid in ids_in_shard(ns_id, shard, 3, "ticking")]
    async with Worker(client, task_queue=task_queue, workflows=[pw.TickingParent, pw.EchoChild]):
        start_times, handles = [], []
        for wid in wids:
            t0 = time.monotonic()
            handles.append(
                await client.start_workflow(pw.TickingParent.run, 3, id=wid, task_queue=task_queue)
            )
            start_times.append(time.monotonic() - t0)
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=60)
        assert results == [3] * len(handles)
    late = [x for h in handles for x in await timer_lateness(h)]
    for h in handles:
        late += await timer_lateness(client.get_workflow_handle(f"{h.id}-child"))
    assert len(late) == 4 * len(handles)
    print(
        f"\n[{running.address}] healthy timers {label}: {len(late)} timers, lateness median "
        f"{statistics.median(late) * 1000:.0f} ms, p99 {p99(late) * 1000:.0f} ms, max {max(late) * 1000:.0f} ms; "
        f"starts max {max(start_times) * 1000:.0f} ms"
    )
    return late


def stop_within(running: servers.Running, name: str, seconds: float = 10.0) -> float:
    proc = running.processes[name]
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=seconds)
    except Exception:
        proc.kill()
        proc.wait()
        pytest.fail(f"{name} did not stop within {seconds} s of SIGTERM")
    return time.monotonic() - started


def cpu_seconds(running: servers.Running) -> float:
    """User + system CPU time so far of the server's processes and their children (Celery's pool)."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = {proc.pid for proc in running.processes.values()}
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(stat.parent.name) in pids or int(fields[1]) in pids:
                total += (int(fields[11]) + int(fields[12])) / tick
    return total


def log_bytes(running: servers.Running) -> int:
    return sum(path.stat().st_size for path in running.logs.values() if path.exists())


async def test_an_activity_retry_interval_of_duration_max_stalls_no_timer(poisoned):
    """The reported case: an activity whose retry interval is Duration's maximum times out. Computing its
    next attempt overflowed; the timer row raised on every pass and no other timer (dev: of any shard after
    it; Celery: of its shard) fired again. The edge now caps the interval to Temporal's 100 years, so the
    next attempt is scheduled a century out, no row fails, and the other timers go on. (Rows that fail
    anyway are parked: the corrupted-row test below.)"""
    running = poisoned
    await asyncio.to_thread(running.cli, "namespace", "create", "retries")
    healthy = await Client.connect(running.address, namespace="default")
    bad = await Client.connect(running.address, namespace="retries")
    poison_id = f"huge-retry-{uuid.uuid4()}"
    shard = zlib.crc32(f"{await namespace_id(bad, 'retries')}/{poison_id}".encode()) % SHARDS
    default_id = await namespace_id(healthy, "default")
    shards = (shard, (shard + 1) % SHARDS)
    baseline = await healthy_round(running, healthy, default_id, shards, "before the huge retry interval")

    task_queue = f"tq-{uuid.uuid4()}"
    async with Worker(bad, task_queue=task_queue, workflows=[pw.HugeRetryInterval], activities=[pw.outlast]):
        handle = await bad.start_workflow(pw.HugeRetryInterval.run, id=poison_id, task_queue=task_queue)
        await asyncio.sleep(1.5)  # the first attempt has timed out: its retry is computed from now on
        during = await healthy_round(running, healthy, default_id, shards, "beside the huge retry interval")
        described = await handle.describe()
    assert max(during) < max(max(baseline), LATENESS_BOUND) + SLACK
    assert await parked(running, "retries") == []
    (activity,) = described.raw_description.pending_activities
    assert activity.attempt == 2
    next_attempt = activity.next_attempt_schedule_time.ToDatetime(tzinfo=UTC)
    assert next_attempt - datetime.now(UTC) > timedelta(days=99 * 365)
    await handle.terminate("test over")


async def test_a_hundred_child_starts_that_cannot_start_stall_no_timer(poisoned):
    """The reported case, as a tenant sends it: 100 child starts in one workflow task, each with a 1e12 s
    execution timeout. Each child-start transfer raised (a date overflow); the transfer batch re-read the
    same 100 rows forever and nothing else ran. The edge now caps the timeout to Temporal's 100 years, so
    all 100 children start and finish, no row fails, and the other timers go on. (Rows that fail anyway are
    parked: the corrupted-row test below.)

    On Postgres the children's work itself made the other tenant's timers up to 5 s late: every wake-up of
    the burst queued a pass of its own, and an empty pass cost 21 statements. Wake-ups a pass has already
    answered are now dropped (engine/tasks.py) and a pass probes its queues in one statement."""
    running = poisoned
    await asyncio.to_thread(running.cli, "namespace", "create", "children")
    healthy = await Client.connect(running.address, namespace="default")
    bad = await Client.connect(running.address, namespace="children")
    poison_id = f"huge-children-{uuid.uuid4()}"
    shard = zlib.crc32(f"{await namespace_id(bad, 'children')}/{poison_id}".encode()) % SHARDS
    default_id = await namespace_id(healthy, "default")
    shards = (shard, (shard + 5) % SHARDS)
    baseline = await healthy_round(running, healthy, default_id, shards, "before the 100 child starts")

    task_queue = f"tq-{uuid.uuid4()}"
    async with Worker(bad, task_queue=task_queue, workflows=[pw.HugeChildTimeouts, pw.EchoChild]):
        handle = await bad.start_workflow(pw.HugeChildTimeouts.run, id=poison_id, task_queue=task_queue)
        await asyncio.sleep(1)
        during = await healthy_round(running, healthy, default_id, shards, "beside the 100 child starts")
        assert await asyncio.wait_for(handle.result(), timeout=60) == sum(range(100))
    assert max(during) < max(max(baseline), LATENESS_BOUND) + SLACK
    assert await parked(running, "children") == []


async def test_poison_rows_of_one_namespace_stall_nothing_else(poisoned):
    running, db = poisoned, Db(poisoned)
    await asyncio.to_thread(running.cli, "namespace", "create", "poison")
    healthy = await Client.connect(running.address, namespace="default")
    bad = await Client.connect(running.address, namespace="poison")

    # Two runs of the poison namespace (no worker: their first tasks just wait) and a schedule.
    victim = await bad.start_workflow("Nobody", id=f"victim-{uuid.uuid4()}", task_queue="nowhere")
    broken = await bad.start_workflow("Nobody", id=f"broken-{uuid.uuid4()}", task_queue="nowhere")
    schedule_id = f"sched-{uuid.uuid4()}"
    await bad.create_schedule(
        schedule_id,
        Schedule(
            action=ScheduleActionStartWorkflow("Nobody", id=f"s-{uuid.uuid4()}", task_queue="nowhere"),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
        ),
    )
    ((victim_pk, victim_shard),) = db.run(
        "SELECT id, shard FROM engine_execution WHERE workflow_id = %s", (victim.id,)
    )
    ((broken_pk, original_state),) = db.run(
        "SELECT id, state FROM engine_execution WHERE workflow_id = %s", (broken.id,)
    )
    default_id = await namespace_id(healthy, "default")
    shards = (0, victim_shard, 7)
    baseline = await healthy_round(running, healthy, default_id, shards, "before")

    now = datetime.now(UTC)
    past = db.time(now - timedelta(seconds=1))
    db.run("UPDATE engine_execution SET state = %s WHERE id = %s", (b"not a sealed state", broken_pk))
    for shard in range(SHARDS):
        db.run(
            "INSERT INTO engine_timer (shard, fire_at, execution_id, kind, event_id, attempt, detail) "
            "VALUES (%s, %s, %s, 1, 5, 0, 0)",
            (shard, past, broken_pk),
        )
    db.run(
        "INSERT INTO engine_timer (shard, fire_at, execution_id, kind, event_id, attempt, detail) "
        "VALUES (%s, %s, %s, 99, 1, 0, 0)",
        (victim_shard, past, victim_pk),
    )
    for i in range(POISON_TRANSFERS):
        db.run(
            "INSERT INTO engine_transfer (shard, execution_id, kind, event_id, details, created_at) "
            "VALUES (%s, %s, 3, %s, %s, %s)",
            (0, victim_pk, 1000 + i, b"cannot be unsealed", past),
        )
    db.run(
        "UPDATE engine_schedule SET data = %s, next_wakeup_at = %s WHERE schedule_id = %s",
        (b"corrupt", past, schedule_id),
    )
    expected = SHARDS + 1 + POISON_TRANSFERS + 1
    log_before = log_bytes(running)

    # The healthy namespace, in the poisoned shards, while every poison row fails and backs off.
    during = await healthy_round(running, healthy, default_id, shards, "beside the poison rows")
    assert max(during) < max(max(baseline), LATENESS_BOUND) + SLACK

    rows = await wait_parked(running, "poison", expected)
    assert len(rows) == expected, rows[:3]
    by_queue: dict[str, int] = {}
    for row in rows:
        by_queue[row["queue"]] = by_queue.get(row["queue"], 0) + 1
        assert row["attempts"] == MAX_ATTEMPTS
        assert row["last_error"]
        assert row["namespace"] == "poison"
    assert by_queue == {"timer": SHARDS + 1, "transfer": POISON_TRANSFERS, "schedule": 1}
    kinds = {(r["queue"], r["kind"]) for r in rows}
    assert kinds == {
        ("timer", "USER_TIMER"),
        ("timer", "UNKNOWN(99)"),
        ("transfer", "SIGNAL_EXTERNAL"),
        ("schedule", "SCHEDULE_TICK"),
    }
    assert {r["workflow_id"] for r in rows if r["queue"] == "timer"} == {broken.id, victim.id}
    assert next(r for r in rows if r["queue"] == "schedule")["workflow_id"] == schedule_id
    # Parked rows cost nothing: the server idles (before, it spun on them at most of a core).
    cpu, wall = cpu_seconds(running), time.monotonic()
    await asyncio.sleep(3)
    busy = (cpu_seconds(running) - cpu) / (time.monotonic() - wall)
    print(f"[{running.address}] CPU with {expected} parked rows: {busy:.0%} of a core")
    assert busy < 0.5
    text = await asyncio.to_thread(running.cli, "shards", "parked")
    assert f"namespace=poison workflow_id={broken.id}" in text
    grown = log_bytes(running) - log_before
    print(f"[{running.address}] log grew {grown / 1024:.0f} KiB while {expected} rows failed and were parked")
    assert grown < 256 * 1024

    # The operator repairs the broken run and redrives every row of the namespace: its timers fire (as
    # no-ops: the run never started such timers) and go; the rest fails and is parked again, attempts reset.
    db.run("UPDATE engine_execution SET state = %s WHERE id = %s", (original_state, broken_pk))
    # (By id: other tests' parked rows on this server stay parked.)
    out = await asyncio.to_thread(running.cli, "shards", "redrive", *[r["id"] for r in rows])
    assert out.strip() == f"{expected} parked rows made due again (attempts reset)"
    deadline = time.monotonic() + 30
    while db.run("SELECT COUNT(*) FROM engine_timer WHERE execution_id = %s", (broken_pk,))[0][0]:
        assert time.monotonic() < deadline, "redriven timers did not fire"
        await asyncio.sleep(0.25)
    rows = await wait_parked(running, "poison", expected - SHARDS)
    assert len(rows) == expected - SHARDS
    assert {r["attempts"] for r in rows} == {MAX_ATTEMPTS}

    # A healthy run after the redrive, while the redriven rows fail again.
    task_queue = f"tq-{uuid.uuid4()}"
    async with Worker(healthy, task_queue=task_queue, workflows=[pw.TickingParent, pw.EchoChild]):
        handle = await healthy.start_workflow(
            pw.TickingParent.run, 1, id=f"after-{uuid.uuid4()}", task_queue=task_queue
        )
        assert await asyncio.wait_for(handle.result(), timeout=30) == 1


async def test_every_process_stops_within_10_s_of_sigterm_while_busy(poisoned):
    """SIGTERM while the shard processors work through a backlog of 20,000 due timers and a batch of 100
    failing transfers, and a worker's long poll is open: every process exits within 10 s. Before,
    `perdura dev` finished its whole pass first, and a pass spinning on the failing batch kept both
    `perdura dev` and a Celery worker's warm shutdown from ever ending."""
    running, db = poisoned, Db(poisoned)
    client = await Client.connect(running.address, namespace="default")
    handle = await client.start_workflow("Nobody", id=f"busy-{uuid.uuid4()}", task_queue="nowhere")
    ((pk, shard),) = db.run("SELECT id, shard FROM engine_execution WHERE workflow_id = %s", (handle.id,))
    past = db.time(datetime.now(UTC) - timedelta(seconds=1))
    rows = [(s % SHARDS, past, pk) for s in range(20_000)]
    if db.sqlite is not None:
        with contextlib.closing(sqlite3.connect(db.sqlite, timeout=30)) as conn:
            conn.executemany(
                "INSERT INTO engine_timer (shard, fire_at, execution_id, kind, event_id, attempt, detail) "
                "VALUES (?, ?, ?, 1, 99, 0, 0)",
                rows,
            )
            conn.commit()
    else:
        with psycopg.connect(db.url, autocommit=True) as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO engine_timer (shard, fire_at, execution_id, kind, event_id, attempt, detail) "
                "VALUES (%s, %s, %s, 1, 99, 0, 0)",
                rows,
            )
    for i in range(POISON_TRANSFERS):  # a full batch of failing transfers: the old code's endless pass
        db.run(
            "INSERT INTO engine_transfer (shard, execution_id, kind, event_id, details, created_at) "
            "VALUES (%s, %s, 3, %s, %s, %s)",
            (shard, pk, 1000 + i, b"cannot be unsealed", past),
        )
    poll = asyncio.ensure_future(
        client.workflow_service.poll_workflow_task_queue(
            PollWorkflowTaskQueueRequest(
                namespace="default", task_queue=TaskQueue(name=f"idle-{uuid.uuid4()}")
            )
        )
    )
    await asyncio.sleep(2)
    left = db.run("SELECT COUNT(*) FROM engine_timer WHERE execution_id = %s", (pk,))[0][0]
    assert left > 0, "the backlog was gone before the stop signal"
    stops = await asyncio.gather(
        *(asyncio.to_thread(stop_within, running, name) for name in list(running.processes))
    )
    poll.cancel()
    print(
        f"\n[{running.address}] SIGTERM with {left} of 20,000 due timers left: stopped in "
        + ", ".join(f"{n} {s:.1f} s" for n, s in zip(running.processes, stops, strict=True))
    )
