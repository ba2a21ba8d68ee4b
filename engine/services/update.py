"""The single write path for an existing run: load, lock, apply a pure transition, persist, in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError, transaction
from perdura import clock

from engine import ids
from engine.errors import NotFound, Unavailable
from engine.history.errors import RunClosed
from engine.history.mutation import Mutation
from engine.models import Execution
from engine.persistence import store

T = TypeVar("T")
_ATTEMPTS = 5
_RETRYABLE_SQLSTATES = {"40P01", "40001"}  # deadlock detected, serialization failure


def retryable(error: OperationalError) -> bool:
    """A transaction Postgres aborted to break a deadlock (e.g. continue-as-new racing a start): run it again."""
    return getattr(error.__cause__, "sqlstate", None) in _RETRYABLE_SQLSTATES


def run_update(
    *,
    namespace_id: uuid.UUID,
    workflow_id: str,
    run_id: str,
    apply: Callable[[Execution, Mutation], T],
) -> T:
    """Apply `apply` to the run's state and persist everything it implied, atomically.

    `apply` is pure apart from its Mutation; if it raises, nothing is written.

    Raises:
        NotFound: no such run, or (RunClosed) the run is closed.
    """
    for attempt in range(_ATTEMPTS):
        try:
            with transaction.atomic():
                execution = store.find_execution(namespace_id, workflow_id, run_id, lock=True)
                m = Mutation(store.decode_state(execution), clock.now(), ids.SYSTEM)
                result = apply(execution, m)
                store.persist(execution, m)
                return result
        except Unavailable:
            if attempt == _ATTEMPTS - 1:
                raise
        except OperationalError as e:
            if not retryable(e) or attempt == _ATTEMPTS - 1:
                raise
        except RunClosed as e:
            raise NotFound(str(e)) from None
    raise AssertionError("unreachable")


def update_execution(execution_pk: int, apply: Callable[[Execution, Mutation], T]) -> T:
    """Like run_update, for a run known by its row id (timers, task claims)."""
    with transaction.atomic():
        execution = store.lock_execution(execution_pk)
        if execution is None:
            raise Execution.DoesNotExist(execution_pk)
        m = Mutation(store.decode_state(execution), clock.now(), ids.SYSTEM)
        result = apply(execution, m)
        store.persist(execution, m)
        return result
