"""The states of a run's pending things (activities, timers, children) and the one way they change.

Modelled on Temporal's hsm package: a transition names the states it may start from and the state it
leads to, and applying it from any other state is a bug in the rules, not bad input. Inputs that are
merely late (a stale token, a timer that lost a race) are told apart before a transition, as StaleTask.

A thing's state is read from its fields (ActivityInfo.state, ChildInfo.state), so stored run state
needs no new field and cannot disagree with it. CLOSED is the state of leaving the run's pending map:
once it is entered nothing of the thing remains to check.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

from engine.history.errors import InvalidTransition


class ActivityState(enum.Enum):
    SCHEDULED = "scheduled"
    """Waiting for a poller (its first attempt, or a retry's)."""
    STARTED = "started"
    """An attempt is running on a worker."""
    CLOSED = "closed"


class TimerState(enum.Enum):
    STARTED = "started"
    CLOSED = "closed"
    """Fired or cancelled."""


class ChildState(enum.Enum):
    INITIATED = "initiated"
    """The start is on its way to the child's run (a START_CHILD transfer)."""
    STARTED = "started"
    """The child's run exists; its result is awaited."""
    CLOSED = "closed"
    """Its outcome (or its start's failure) is recorded."""


S = TypeVar("S", bound=enum.Enum)
S_co = TypeVar("S_co", bound=enum.Enum, covariant=True)


class Machine(Protocol[S_co]):
    @property
    def state(self) -> S_co: ...


@contextmanager
def transition(machine: Machine[S], sources: Collection[S], destination: S) -> Iterator[None]:
    """Change `machine` (in the with block) from one of `sources` to `destination`.

    Raises:
        InvalidTransition: the machine is in another state before, or not in `destination` after.
    """
    before = machine.state
    if before not in sources:
        raise InvalidTransition(
            f"{type(machine).__name__}: no transition from {before.name} to {destination.name} "
            f"(allowed from {', '.join(sorted(s.name for s in sources))})"
        )
    yield
    if destination.name != "CLOSED" and machine.state != destination:
        raise InvalidTransition(
            f"{type(machine).__name__}: a transition from {before.name} to {destination.name} "
            f"left it {machine.state.name}"
        )
