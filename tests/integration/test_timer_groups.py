"""Due timers of different runs fire together, one fenced transaction for a group (engine/shards/timers.py);
a run's second timer, a row already gone and a lost lease go as they did one at a time. Real Postgres
(`perdura dev`'s SQLite takes the same path in tests/e2e)."""

from __future__ import annotations

import time
from datetime import UTC, timedelta

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from perdura import clock
from temporalio.api.enums.v1 import EventType

from engine.history.mutation import TimerKind
from engine.models import Execution, Timer
from engine.persistence import leases, store, timer_groups
from engine.shards import timers
from tests.integration.test_shard_fencing import fired_events, run_with_due_timer
from tests.support import servers

pytestmark = pytest.mark.django_db(transaction=True)


def runs_on_one_shard(count: int) -> list[Execution]:
    """`count` runs with a due timer each, all moved to the first one's shard."""
    runs = [run_with_due_timer() for _ in range(count)]
    shard = runs[0].shard
    for run in runs:
        Execution.objects.filter(pk=run.pk).update(shard=shard)
        Timer.objects.filter(execution=run).update(shard=shard)
    return runs


def fence_checks(queries: CaptureQueriesContext) -> int:
    """The fence's checks (engine/persistence/leases.py: `check`), one in each fenced transaction."""
    return sum(
        q["sql"].startswith("SELECT range_id FROM engine_shardlease") for q in queries.captured_queries
    )


def test_due_timers_of_several_runs_fire_in_one_fenced_transaction():
    runs = runs_on_one_shard(5)
    with CaptureQueriesContext(connection) as queries:
        fired = timers.process_shard(runs[0].shard, "w")
    assert fired == 5
    assert [fired_events(run) for run in runs] == [1] * 5
    # One at a time, each timer checked the fence in a transaction of its own: five checks.
    assert fence_checks(queries) == 1
    assert not Timer.objects.filter(execution__in=runs, kind=TimerKind.USER_TIMER).exists()


def test_two_due_timers_of_one_run_both_fire():
    run = run_with_due_timer(timers=2)
    assert timers.process_shard(run.shard, "w") == 2
    assert fired_events(run) == 2


def test_a_group_skips_a_row_already_gone_and_fires_the_rest():
    runs = runs_on_one_shard(3)
    rows = list(Timer.objects.filter(execution__in=runs, kind=TimerKind.USER_TIMER).order_by("pk"))
    Timer.objects.filter(pk=rows[1].pk).delete()  # fired, or cancelled, since it was read
    range_id = leases.acquire(runs[0].shard, "w")
    assert range_id is not None
    fired = timers.fire_together(rows, shard=runs[0].shard, range_id=range_id)
    assert [row.pk for row in fired] == [rows[0].pk, rows[2].pk]
    assert [fired_events(run) for run in runs] == [1, 0, 1]


def test_a_group_whose_lease_moved_on_writes_nothing():
    runs = runs_on_one_shard(2)
    rows = list(Timer.objects.filter(execution__in=runs, kind=TimerKind.USER_TIMER))
    range_id = leases.acquire(runs[0].shard, "w")
    assert range_id is not None
    with pytest.raises(leases.LeaseLost):
        timers.fire_together(rows, shard=runs[0].shard, range_id=range_id + 1)
    assert [fired_events(run) for run in runs] == [0, 0]
    assert Timer.objects.filter(pk__in=[row.pk for row in rows]).count() == 2


def test_groups_hold_one_timer_of_a_run_and_at_most_fire_together(settings):
    due = clock.now() - timedelta(seconds=1)
    rows = [
        Timer(pk=i, execution_id=run, shard=0, fire_at=due, kind=1, event_id=5)
        for i, run in enumerate([1, 2, 1, 3, 4, 5])
    ]
    groups = timers._groups(rows)
    assert [[row.pk for row in group] for group in groups] == [[0, 1], [2, 3, 4, 5]]
    many = [Timer(pk=i, execution_id=i, shard=0, fire_at=due, kind=1, event_id=5) for i in range(70)]
    assert [len(group) for group in timers._groups(many)] == [32, 32, 6]


def test_a_pass_for_a_time_just_ahead_reads_its_timers_at_once_and_fires_them_no_sooner():
    run = run_with_due_timer()
    due = clock.now() + timedelta(milliseconds=80)
    Timer.objects.filter(execution=run, kind=TimerKind.USER_TIMER).update(fire_at=due)
    range_id = leases.acquire(run.shard, "w")
    assert range_id is not None
    assert timers.process_held(run.shard, range_id) == 0  # not due yet
    assert timers.process_held(run.shard, range_id, due_by=due) == 1
    (fired,) = [e for e in store.history_events(run) if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    assert fired.event_time.ToDatetime(tzinfo=UTC) >= due


def test_a_process_stopped_after_a_group_opens_loses_its_locks_after_the_idle_timeout():
    # Postgres ends a session idle in a transaction for longer than a lease, so a stopped process cannot
    # hold the fence or the runs' locks (README: Timers are rows). psycopg's pipeline mode, tried first for
    # the opening, left the transaction without that timeout: the session kept its locks for good.
    runs = runs_on_one_shard(1)
    rows = list(Timer.objects.filter(execution__in=runs, kind=TimerKind.USER_TIMER))
    range_id = leases.acquire(runs[0].shard, "w")
    assert range_id is not None
    with connection.cursor() as cursor:
        cursor.execute("SET idle_in_transaction_session_timeout = 300")
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    sessions = []

    def stopped_after_the_opening() -> None:
        with transaction.atomic():
            timer_groups.open_group(runs[0].shard, range_id, [runs[0].pk], [rows[0].pk])
            time.sleep(1.0)  # the process "stopped" inside the transaction
            with psycopg.connect(servers.postgres_admin_url(), autocommit=True) as other:
                sessions.extend(
                    other.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", [pid]).fetchall()
                )

    try:
        with pytest.raises(DatabaseError):  # its session is gone: the commit fails
            stopped_after_the_opening()
    finally:
        connection.close()
    assert sessions == []
    assert Timer.objects.filter(pk=rows[0].pk).exists()  # its transaction rolled back
