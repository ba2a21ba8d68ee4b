"""The single write path: load, lock, apply a pure transition, persist, in one (optionally fenced) transaction.

Every engine write goes through `in_transaction`, which checks the shard's fence first when it is given
(DESIGN.md rule 4) and runs the body again after a deadlock or serialisation failure, and every change
to a run through `apply_locked`, which builds the run's Mutation, applies the rules and persists it with
a compare-and-swap on the run's version (rule 2). `run_update` and `update_execution` join the two for
the usual case of one run; the queue claim, timer fires, transfer outcomes, start, reset and delete
compose them with the rows they claim or create in the same transaction.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from django.db import OperationalError, connection, transaction
from perdura import clock, metrics

from engine import ids
from engine.errors import NotFound, Unavailable
from engine.history.errors import RunClosed
from engine.history.mutation import Mutation
from engine.models import Execution
from engine.persistence import leases, store
from engine.services import recent_events, task_handoff
from tenants import audit, selectors

T = TypeVar("T")
_ATTEMPTS = 5
_RETRYABLE_SQLSTATES = {"40P01", "40001"}  # deadlock detected, serialization failure


_FENCED = metrics.db_transaction_duration.labels("true")
_UNFENCED = metrics.db_transaction_duration.labels("false")
_DEADLOCK_RETRIES = metrics.db_transaction_retries.labels("deadlock")
_CONFLICT_RETRIES = metrics.db_transaction_retries.labels("conflict")


def retryable(error: OperationalError) -> bool:
    """A transaction Postgres aborted to break a deadlock (e.g. continue-as-new racing a start): run it again."""
    return getattr(error.__cause__, "sqlstate", None) in _RETRYABLE_SQLSTATES


def in_transaction(
    body: Callable[[], T],
    *,
    shard: int | None = None,
    range_id: int | None = None,
    attempts: int = 1,
    retry_on: tuple[type[Exception], ...] = (),
    body_fences: bool = False,
) -> T:
    """Run `body` in one transaction, fenced on (`shard`, `range_id`) when given; retried up to `attempts`
    times in all after a deadlock or serialisation failure, or an error of `retry_on`. `body_fences`: the
    body checks the fence itself, in its first statement (it sends that with others in one round trip).

    Raises:
        leases.LeaseLost: the shard's lease moved on; nothing was written.
    """
    duration = _FENCED if shard is not None else _UNFENCED
    # An audited call's entry goes in the call's first outermost transaction (audit.PendingEntry).
    entry = None if connection.in_atomic_block else audit.pending()
    for attempt in range(attempts):
        last = attempt == attempts - 1
        started = time.perf_counter()
        try:
            with task_handoff.transaction_scope(), transaction.atomic():
                if shard is not None and not body_fences:
                    assert range_id is not None
                    leases.check(shard, range_id)
                result = body()
                if entry is not None:
                    entry.write()
            if entry is not None:
                entry.written = True
            return result
        except OperationalError as e:
            if last or not retryable(e):
                raise
            _DEADLOCK_RETRIES.inc()
        except retry_on:
            if last:
                raise
            _CONFLICT_RETRIES.inc()
        finally:
            # Each attempt, committed or rolled back: the time a connection and its locks were held.
            duration.observe(time.perf_counter() - started)
    raise AssertionError("unreachable")


def _retry_defaults(namespace: str) -> tuple[float, bool]:
    """The namespace's default retry jitter and whether exhausted activities park (read through the
    control plane's few-seconds cache)."""
    row = selectors.namespace_by_name(namespace)
    if row is None:
        return 0.0, False
    return row.retry_jitter, row.on_retries_exhausted == "park"


def apply_locked(
    execution: Execution,
    apply: Callable[[Execution, Mutation], T],
    *,
    now: datetime | None = None,
    claimed_task: int | None = None,
) -> T:
    """Inside `in_transaction`, on a run the caller locked: apply `apply` and persist what it implied
    (with the deletion of `claimed_task`, the queue row whose claim it records).

    `apply` is pure apart from its Mutation; if it raises, nothing of the run is written.
    """
    state = store.decode_state(execution)
    jitter, park = _retry_defaults(state.namespace)
    m = Mutation(state, now or clock.now(), ids.SYSTEM, retry_jitter=jitter, park_on_exhausted=park)
    result = apply(execution, m)
    with task_handoff.handing_over(execution, m):
        store.persist(execution, m, claimed_task=claimed_task)
    recent_events.remember_on_commit(execution, m)
    return result


def run_update(
    *,
    namespace_id: uuid.UUID | str,
    workflow_id: str,
    run_id: str,
    apply: Callable[[Execution, Mutation], T],
    shard: int | None = None,
    range_id: int | None = None,
) -> T:
    """Apply `apply` to the run's state and persist everything it implied, atomically (fenced on
    (`shard`, `range_id`) when given). A concurrent change or a deadlock runs it again.

    Raises:
        NotFound: no such run, or (RunClosed) the run is closed.
    """

    def body() -> T:
        return apply_locked(store.find_execution(namespace_id, workflow_id, run_id, lock=True), apply)

    try:
        return in_transaction(
            body, shard=shard, range_id=range_id, attempts=_ATTEMPTS, retry_on=(Unavailable,)
        )
    except RunClosed as e:
        raise NotFound(str(e)) from None


def update_execution(
    execution_pk: int,
    apply: Callable[[Execution, Mutation], T],
    *,
    shard: int | None = None,
    range_id: int | None = None,
) -> T:
    """Like run_update, for a run known by its row id (timers, task claims), without retries.

    Raises:
        Execution.DoesNotExist: the run is gone.
    """

    def body() -> T:
        execution = store.lock_execution(execution_pk)
        if execution is None:
            raise Execution.DoesNotExist(execution_pk)
        return apply_locked(execution, apply)

    return in_transaction(body, shard=shard, range_id=range_id)
