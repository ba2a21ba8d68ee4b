"""Runs on disk: load and lock a run, persist a mutation (events, state, tasks, timers) in one go, read history."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, models
from temporalio.api.history.v1 import History, HistoryEvent

from engine import live, notify
from engine.errors import NotFound, Unavailable
from engine.history import state as state_codec
from engine.history import subjects
from engine.history.mutation import Mutation
from engine.history.query_consistency import holds_queries
from engine.history.state import MutableState
from engine.models import CurrentRun, Execution, HistoryBatch, Task, Timer, Transfer
from engine.persistence import (
    encryption,
    model_rows,
    query_rows,
    retention,
    state_seal,
    subject_seal,
    visibility,
    wakeups,
)
from visibility.backends.sql import records


def encode_state(namespace_id: uuid.UUID, state: MutableState) -> bytes:
    subject = subjects.subject_of(state.search_attributes)
    plain = (
        state_codec.dump(state) if subject is None else state_seal.seal_state(namespace_id, subject, state)
    )
    return encryption.seal(namespace_id, plain, encryption.state_aad(namespace_id, state.run_id))


def decode_state(execution: Execution) -> MutableState:
    data = encryption.unseal(
        execution.namespace_id,
        execution.state,
        encryption.state_aad(execution.namespace_id, execution.run_id),
    )
    return state_seal.open_state(execution.namespace_id, data)


def find_execution(namespace_id: uuid.UUID | str, workflow_id: str, run_id: str, *, lock: bool) -> Execution:
    """The run (the current one when `run_id` is empty), optionally locked for update.

    Raises:
        NotFound: no such run in this namespace.
    """
    namespace = uuid_param(namespace_id)
    if not run_id:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT run_id FROM engine_currentrun WHERE namespace_id = %s AND workflow_id = %s",
                [namespace, workflow_id],
            )
            row = cursor.fetchone()
        if row is None:
            raise NotFound(f"workflow not found for ID: {workflow_id}")
        run_id = row[0]
    rows = model_rows.fetch(
        Execution,
        f"SELECT {model_rows.columns(Execution)} FROM engine_execution "
        "WHERE namespace_id = %s AND workflow_id = %s AND run_id = %s" + _for_update(lock),
        [namespace, workflow_id, run_id],
    )
    if not rows:
        raise NotFound(f"workflow execution not found for workflow ID {workflow_id!r} and run ID {run_id!r}")
    return rows[0]


def lock_execution(pk: int) -> Execution | None:
    """The run with row id `pk`, locked for update (None if it is gone)."""
    return load_execution(pk, lock=True)


def load_execution(pk: int, *, lock: bool = False) -> Execution | None:
    """The run with row id `pk`, optionally locked for update (None if it is gone)."""
    rows = model_rows.fetch(
        Execution,
        f"SELECT {model_rows.columns(Execution)} FROM engine_execution WHERE id = %s" + _for_update(lock),
        [pk],
    )
    return rows[0] if rows else None


def _for_update(lock: bool) -> str:
    # SQLite has no row locks: its IMMEDIATE transactions already serialise writers.
    return " FOR UPDATE" if lock and connection.features.has_select_for_update else ""


def claim_workflow_id(namespace_id: uuid.UUID, workflow_id: str, run_id: str, request_id: str) -> bool:
    """Make `run_id` the current run of a workflow id that has none, in one statement; False (and nothing
    written) if the id has a current run. The new row stays locked until the caller's transaction ends,
    and a concurrent claim of the same id waits for it, then finds the id taken."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO engine_currentrun (namespace_id, workflow_id, run_id, start_request_id) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace_id, workflow_id) DO NOTHING RETURNING id",
            [uuid_param(namespace_id), workflow_id, run_id, request_id],
        )
        return cursor.fetchone() is not None


def insert(namespace_id: uuid.UUID, shard: int, m: Mutation) -> Execution:
    """Create the row of a new run and persist its first mutation (inside the caller's transaction)."""
    execution = new_execution(namespace_id, shard, m)
    write_new(execution, m)
    return execution


def new_execution(namespace_id: uuid.UUID, shard: int, m: Mutation) -> Execution:
    """The row of a new run, not yet written (`write_new` writes it, with `m`)."""
    s = m.state
    return Execution(
        namespace_id=namespace_id,
        workflow_id=s.workflow_id,
        run_id=s.run_id,
        shard=shard,
        workflow_type=s.workflow_type,
        task_queue=s.task_queue,
        status=s.status,
        start_time=s.start_time,
        execution_time=s.execution_time,
    )


def write_new(execution: Execution, m: Mutation) -> None:
    """Write a `new_execution` row and persist its first mutation (inside the caller's transaction)."""
    s = m.state
    s.state_transitions += 1
    execution.status = s.status
    execution.next_event_id = s.next_event_id
    execution.state = encode_state(execution.namespace_id, s)
    namespace_id = execution.namespace_id
    shard = execution.shard
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO engine_execution (namespace_id, workflow_id, run_id, shard, workflow_type, task_queue, "
            "status, start_time, execution_time, next_event_id, db_version, state, queries_parked) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            [
                uuid_param(namespace_id),
                s.workflow_id,
                s.run_id,
                shard,
                s.workflow_type,
                s.task_queue,
                s.status,
                _dt(s.start_time),
                _dt(s.execution_time),
                s.next_event_id,
                execution.db_version,
                execution.state,
                False,
            ],
        )
        execution.pk = cursor.fetchone()[0]
    execution._state.adding = False
    writes: list[_Write] = [_Upsert(visibility.record_write(execution, s, m)), *_row_writes(execution, m)]
    keys = _wake_ups(execution, m)
    _, notified = _send(None, writes, keys)
    _persist_derived(execution, m, keys, notified=notified)


FOLD_MOST_ROWS = 50
"""On Postgres a mutation's rows (at most this many) ride its run's compare-and-swap statement."""


def persist(execution: Execution, m: Mutation, *, claimed_task: int | None = None) -> None:
    """Write a mutation of a locked run: compare-and-swap on its version (rule 2), then derived rows.

    `claimed_task`: the queue row whose claim this mutation records, deleted with it."""
    s = m.state
    s.state_transitions += 1
    # Hand-written SQL on the hot path: the ORM's query building costs more than the query itself.
    swap = (
        "UPDATE engine_execution SET status = %s, close_time = %s, next_event_id = %s, "
        "db_version = db_version + 1, state = %s WHERE id = %s AND db_version = %s"
    )
    swap_params = [
        s.status,
        _dt(s.close_time),
        s.next_event_id,
        encode_state(execution.namespace_id, s),
        execution.pk,
        execution.db_version,
    ]
    writes: list[_Write] = [*_row_writes(execution, m)]
    if claimed_task is not None:
        writes.append(_Delete("engine_task", "id = %s", [claimed_task]))
    if visibility.changed(execution, m):
        writes.append(_Upsert(visibility.record_write(execution, s, m)))
    keys = _wake_ups(execution, m)
    swapped, notified = _send((swap, swap_params), writes, keys)
    if not swapped:
        raise Unavailable("the workflow execution changed concurrently; retry the request")
    execution.db_version += 1
    if m.closed:
        # Every close (complete, fail, time out, terminate, cancel, continue-as-new, retry, cron) passes
        # here: its retention row commits with the close event.
        assert s.close_time is not None
        retention.schedule_txn(execution, s.close_time)
    _persist_derived(execution, m, keys, notified=notified)
    if m.continued is not None:
        # The next run of the chain is created in the same transaction; it becomes the current run.
        insert(execution.namespace_id, execution.shard, m.continued)
        CurrentRun.objects.filter(
            namespace_id=execution.namespace_id, workflow_id=execution.workflow_id, run_id=execution.run_id
        ).update(run_id=m.continued.state.run_id, start_request_id=m.continued.state.start_request_id)


def _send(
    swap: tuple[str, list[Any]] | None, writes: list[_Write], keys: dict[str, int]
) -> tuple[bool, bool]:
    """Send a run's compare-and-swap (none for a new run) and, if it took, its mutation's `writes`.

    Returns whether the swap took, and whether `keys` were NOTIFYed with the writes (if not, they are
    left to the caller)."""
    head, params = swap if swap is not None else ("SELECT 1", [])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql" and sum(w.rows for w in writes) <= FOLD_MOST_ROWS:
            # One round trip: each write is a WITH clause that reads the swap's RETURNING, so none is
            # written when the swap fails (and the caller's transaction rolls back on the error that
            # follows, NOTIFYs and all).
            clauses = [f"swapped AS ({head}{' RETURNING 1' if swap is not None else ''})"]
            params = list(params)
            for i, write in enumerate(writes):
                clauses.append(f"w{i} AS ({write.folded()})")
                params += write.params
            calls, notify_params = notify.notify_calls(keys)
            selected = ", ".join(["(SELECT count(*) FROM swapped)", *calls])
            cursor.execute(f"WITH {', '.join(clauses)} SELECT {selected}", params + notify_params)
            return cursor.fetchone()[0] == 1, True
        if swap is not None:
            cursor.execute(head, params)
            if cursor.rowcount != 1:
                return False, False
        for write in writes:
            for sql, values in write.statements():
                cursor.execute(sql, values)
        return True, False


def _dt(value: datetime | None) -> Any:
    return connection.ops.adapt_datetimefield_value(value) if value is not None else None


def uuid_param(value: uuid.UUID | str) -> uuid.UUID | str:
    value = value if isinstance(value, uuid.UUID) else uuid.UUID(value)
    return value if connection.features.has_native_uuid_field else value.hex


@dataclass(frozen=True, slots=True)
class _Insert:
    """Rows of a mutation for one table: sent as statements of their own, or as a WITH clause that
    writes only if the run's compare-and-swap (`swapped`) did. Each form is built only when sent."""

    model: type[models.Model]
    columns: tuple[str, ...]
    values: list[list[Any]]

    @property
    def rows(self) -> int:
        return len(self.values)

    @property
    def params(self) -> list[Any]:
        return [value for row in self.values for value in row]

    def _head(self) -> str:
        return f"INSERT INTO {self.model._meta.db_table} ({', '.join(self.columns)})"

    def statements(self) -> list[tuple[str, list[Any]]]:
        plain = "(" + ", ".join(["%s"] * len(self.columns)) + ")"
        found = []
        for at in range(0, len(self.values), INSERT_CHUNK):
            chunk = self.values[at : at + INSERT_CHUNK]
            found.append(
                (
                    f"{self._head()} VALUES {', '.join([plain] * len(chunk))}",
                    [v for row in chunk for v in row],
                )
            )
        return found

    def folded(self) -> str:
        typed = _casts(self.model, self.columns)
        return f"{self._head()} SELECT v.* FROM (VALUES {', '.join([typed] * self.rows)}) AS v, swapped"


@dataclass(frozen=True, slots=True)
class _Delete:
    """Rows of a mutation's run that it ended, as `_Insert` sends them."""

    table: str
    where: str
    params: list[Any]
    rows = 0

    def statements(self) -> list[tuple[str, list[Any]]]:
        return [(f"DELETE FROM {self.table} WHERE {self.where}", self.params)]

    def folded(self) -> str:
        return f"DELETE FROM {self.table} WHERE {self.where} AND EXISTS (SELECT 1 FROM swapped)"


@dataclass(frozen=True, slots=True)
class _Upsert:
    """The run's visibility record, written as `_Insert` writes rows."""

    upsert: records.Upsert
    rows = 1

    @property
    def params(self) -> list[Any]:
        return self.upsert.params

    def statements(self) -> list[tuple[str, list[Any]]]:
        return [(self.upsert.statement(), self.upsert.params)]

    def folded(self) -> str:
        return self.upsert.folded("swapped")


_Write = _Insert | _Delete | _Upsert


INSERT_CHUNK = 500
"""Rows a multi-row INSERT sent on its own carries at most (well under either database's parameter limit)."""


@functools.cache
def _casts(model: type[models.Model], columns: tuple[str, ...]) -> str:
    """A Postgres VALUES row of placeholders typed as their columns: a NULL or a string there is otherwise
    untyped."""
    casts = []
    for name in columns:
        field = model._meta.get_field(name)
        assert isinstance(field, models.Field)
        # varchar without its length: a cast would cut a long value short, the column refuses it.
        db_type = re.sub(r"^varchar\(\d+\)$", "varchar", str(field.db_type(connection)))
        casts.append(f"%s::{db_type}")
    return "(" + ", ".join(casts) + ")"


_TASK_COLUMNS = (
    "namespace_id",
    "task_queue",
    "kind",
    "execution_id",
    "scheduled_event_id",
    "attempt",
    "visible_at",
)
_TIMER_COLUMNS = ("shard", "fire_at", "execution_id", "kind", "event_id", "attempt", "detail")


def _row_writes(execution: Execution, m: Mutation) -> list[_Insert | _Delete]:
    """The mutation's rows beside the run's own: timers it ended, its history batch, its tasks and timers."""
    writes: list[_Insert | _Delete] = []
    if m.closed:
        writes += _pending_deleted(execution)
    if m.dead_timers and not m.closed:  # a close deletes them all
        clauses, params = [], [execution.pk]
        for dead in m.dead_timers:
            if dead.attempt is None:
                clauses.append("(kind = %s AND event_id = %s)")
                params += [int(dead.kind), dead.event_id]
            else:
                clauses.append("(kind = %s AND event_id = %s AND attempt = %s)")
                params += [int(dead.kind), dead.event_id, dead.attempt]
        where = f"execution_id = %s AND ({' OR '.join(clauses)})"
        writes.append(_Delete("engine_timer", where, params))
    if m.events:
        first = m.events[0].event_id
        subject = subjects.subject_of(m.state.search_attributes)
        blob = (
            History(events=m.events).SerializeToString()
            if subject is None
            else subject_seal.seal_events(execution.namespace_id, subject, m.events)
        )
        sealed = encryption.seal(
            execution.namespace_id,
            blob,
            encryption.history_aad(execution.namespace_id, execution.run_id, first),
        )
        writes.append(
            _Insert(
                HistoryBatch,
                ("execution_id", "first_event_id", "last_event_id", "data"),
                [[execution.pk, first, m.events[-1].event_id, sealed]],
            )
        )
    if m.tasks and not m.closed:
        namespace = uuid_param(execution.namespace_id)
        rows = [
            [
                namespace,
                t.task_queue,
                int(t.kind),
                execution.pk,
                t.scheduled_event_id,
                t.attempt,
                _dt(t.visible_at),
            ]
            for t in m.tasks
        ]
        writes.append(_Insert(Task, _TASK_COLUMNS, rows))
    if m.timers and not m.closed:
        rows = [
            [execution.shard, _dt(t.fire_at), execution.pk, int(t.kind), t.event_id, t.attempt, t.detail]
            for t in m.timers
        ]
        writes.append(_Insert(Timer, _TIMER_COLUMNS, rows))
    return writes


def _wake_ups(execution: Execution, m: Mutation) -> dict[str, int]:
    """The hints a mutation's rows call for, known before they are written: its run's new events (or an
    update's outcome, or a standalone activity's change, without one) or close, its new tasks, and its
    timers that come due before the next sweep."""
    keys: dict[str, int] = {}
    if m.closed:
        keys[notify.closed_key(execution.pk)] = 1
    # A standalone activity's host run changes without events (its attempt starts, heartbeats): each change
    # is what a Describe long poll waits for.
    if m.events or m.update_settled_without_event or m.state.standalone is not None:
        keys[notify.run_key(execution.pk)] = 1
    if m.tasks and not m.closed:
        for t in m.tasks:
            key = notify.task_queue_key(execution.namespace_id, int(t.kind), t.task_queue)
            keys[key] = keys.get(key, 0) + 1
    if m.timers and not m.closed:
        wakeups.timers_created(execution.shard, m.now, m.timers, keys)
    return keys


def _pending_deleted(execution: Execution) -> list[_Insert | _Delete]:
    """A closed run's timers and tasks; its query tasks stay, queries still get answered by replay."""
    if connection.vendor == "postgresql":
        # Skip rows a poller holds: it will find the run closed and discard them itself.
        tasks = (
            "id IN (SELECT id FROM engine_task WHERE execution_id = %s AND kind <> 3 FOR UPDATE SKIP LOCKED)"
        )
    else:
        tasks = "execution_id = %s AND kind <> 3"
    return [
        _Delete("engine_timer", "execution_id = %s", [execution.pk]),
        _Delete("engine_task", tasks, [execution.pk]),
    ]


def _persist_derived(execution: Execution, m: Mutation, keys: dict[str, int], *, notified: bool) -> None:
    """What follows a mutation's writes (`_row_writes`): its transfers, its parked queries, and the hints
    (`keys`, already NOTIFYed if `notified`) with those these add."""
    # Also state-only changes (an activity's attempt, a heartbeat): the console's run page shows them.
    live.run_changed_on_commit(namespace_id=execution.namespace_id, execution_pk=execution.pk)
    more: dict[str, int] = {}
    if m.transfers:
        Transfer.objects.bulk_create(
            [
                Transfer(
                    shard=execution.shard,
                    execution=execution,
                    kind=int(t.kind),
                    event_id=t.event_id,
                    details=encryption.seal(
                        execution.namespace_id,
                        t.details,
                        encryption.transfer_aad(execution.namespace_id, execution.run_id, t.event_id),
                    ),
                    created_at=m.now,
                )
                for t in m.transfers
            ]
        )
        wakeups.transfers_created(execution.shard, more)
    if m.queries_held and not holds_queries(m.state):
        more.update(query_rows.release(execution, m.state, m.now))
    if notified:
        notify.publish_here_on_commit(keys)
        notify.publish_on_commit(more)
    else:
        for key, count in more.items():
            keys[key] = keys.get(key, 0) + count
        notify.publish_on_commit(keys)


SMALL_READ_EVENTS = 1000
"""A history read spanning fewer events than this fetches its batches in one statement."""


def history_events(
    execution: Execution,
    *,
    first_event_id: int = 1,
    last_event_id: int | None = None,
    keep_sealed: bool = False,
) -> Iterator[HistoryEvent]:
    """The run's events from `first_event_id` (through `last_event_id`), decrypted, in order.

    Payloads sealed under a data subject's key are opened, or left sealed with `keep_sealed` (exports);
    those whose key was destroyed come as erased markers either way (engine/persistence/subject_seal.py).
    """
    keys = subject_seal.Keys(execution.namespace_id)
    # A server-side cursor (what iterator() opens on Postgres) costs three statements: worth it for a
    # whole history (an export), not for the page or the one event most reads ask for. Those are the
    # hot path (every workflow task's history), so they skip the ORM's query building too.
    batches: Iterable[tuple[int, bytes]]
    if last_event_id is not None and last_event_id - first_event_id < SMALL_READ_EVENTS:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT first_event_id, data FROM engine_historybatch WHERE execution_id = %s "
                "AND last_event_id >= %s AND first_event_id <= %s ORDER BY first_event_id",
                [execution.pk, first_event_id, last_event_id],
            )
            batches = cursor.fetchall()
    else:
        rows = HistoryBatch.objects.filter(execution=execution, last_event_id__gte=first_event_id)
        if last_event_id is not None:
            rows = rows.filter(first_event_id__lte=last_event_id)
        batches = rows.order_by("first_event_id").values_list("first_event_id", "data").iterator()
    for batch_first, sealed in batches:
        data = encryption.unseal(
            execution.namespace_id,
            bytes(sealed),
            encryption.history_aad(execution.namespace_id, execution.run_id, batch_first),
        )
        for event in subject_seal.open_history(data, keys, keep_sealed=keep_sealed).events:
            if event.event_id < first_event_id:
                continue
            if last_event_id is not None and event.event_id > last_event_id:
                return
            yield event


def due_timers(shard: int, now: datetime, limit: int) -> list[Timer]:
    """Live timers of `shard` due by `now`, oldest first (parked ones are out of the partial due index)."""
    # Written out (engine/persistence/model_rows.py): it starts every timer pass, and the ORM's query
    # building was a fifth of perdura dev's firing time.
    sql = (
        f"SELECT {model_rows.columns(Timer)} FROM engine_timer "
        "WHERE shard = %s AND parked_at IS NULL AND fire_at <= %s ORDER BY fire_at, id LIMIT %s"
    )
    return model_rows.fetch(Timer, sql, [shard, connection.ops.adapt_datetimefield_value(now), limit])
