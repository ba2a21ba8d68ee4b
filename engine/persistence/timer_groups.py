"""The opening of a group of timer fires (engine/shards/timers.py: `fire_together`): the shard's fence
checked, the group's runs locked, its timer rows deleted, on Postgres in one round trip after the BEGIN.

One statement after another, with the BEGIN before them, that was four round trips before a fire could
start, each a wake-up of the loop's thread and of a Postgres backend: on a busy two-core machine, a few
milliseconds of every timer's lateness. The three statements now travel as one query string; Postgres
runs them in order, as it would have one by one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection

from engine.models import Execution
from engine.persistence import leases, model_rows


def open_group(
    shard: int, range_id: int, run_ids: Sequence[int], timer_ids: Sequence[int]
) -> tuple[dict[int, Execution], set[int]]:
    """Inside a transaction: fail unless `range_id` is still the shard's (its lease row share-locked until
    commit, as `leases.check` does), lock the runs `run_ids` that exist in id order (two callers locking
    overlapping sets wait for each other instead of deadlocking), and delete the timer rows `timer_ids`.
    Returns the runs by id, and the ids of the timer rows that were there.

    Raises:
        leases.LeaseLost: another worker took the shard; the caller's transaction must roll back (the
            rows deleted come back with it).
    """
    runs = sorted(set(run_ids))
    fence = leases.check_statement(shard)
    columns = model_rows.columns(Execution)
    lock_sql = f"SELECT {columns} FROM engine_execution WHERE id IN ({_marks(runs)}) ORDER BY id"
    delete = (f"DELETE FROM engine_timer WHERE id IN ({_marks(timer_ids)}) RETURNING id", list(timer_ids))
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            # SQLite has no row locks (its IMMEDIATE transactions already serialise writers), and its calls
            # make no round trip.
            cursor.execute(*fence)
            leases.verify(shard, range_id, cursor.fetchone())
            cursor.execute(lock_sql, runs)
            found = cursor.fetchall()
            cursor.execute(*delete)
            deleted = cursor.fetchall()
        else:
            found, deleted = _open_in_one_round_trip(
                shard, range_id, fence, (lock_sql + " FOR UPDATE", runs), delete
            )
    executions = [model_rows.instance(Execution, row) for row in found]
    return {e.pk: e for e in executions}, {row[0] for row in deleted}


def _open_in_one_round_trip(
    shard: int,
    range_id: int,
    fence: tuple[str, list[Any]],
    lock: tuple[str, list[Any]],
    delete: tuple[str, list[Any]],
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Postgres: the fence, the runs' locks and the timers' deletion as one query string of three
    statements, sent in one message (the simple query protocol) whose answers come back together, one
    result set each. That needs its parameters bound on the client, so it goes through a client-binding
    cursor (the connection's own bind on the server, to prepare their statements: settings).
    Not psycopg's pipeline mode: its flush requests left the transaction without
    idle_in_transaction_session_timeout, so a process stopped after them held the fence and the run locks
    for as long as it stayed stopped (tests/chaos/test_stale_lease.py)."""
    import psycopg

    connection.ensure_connection()
    raw: Any = psycopg.ClientCursor(connection.connection)  # Django's wrappers take any DB-API cursor
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    with wrap(raw) as cursor:
        cursor.execute(";\n".join([fence[0], lock[0], delete[0]]), fence[1] + lock[1] + delete[1])
        leases.verify(shard, range_id, cursor.fetchone())
        cursor.nextset()
        found = cursor.fetchall()
        cursor.nextset()
        deleted = cursor.fetchall()
    return found, deleted


def _marks(values: Sequence[object]) -> str:
    return ", ".join(["%s"] * len(values))
