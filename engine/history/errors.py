"""Errors the pure state machine raises; the service layer maps them to gRPC statuses."""

from __future__ import annotations

from typing import Protocol


class _Run(Protocol):
    """What require_running reads of a run's state (a protocol: the state module imports this one)."""

    @property
    def running(self) -> bool: ...


class StaleTask(Exception):
    """A task token or timer no longer matches the run's state (completed, retried, or never existed)."""


class CommandFailure(Exception):
    """A workflow task's commands cannot be applied: the task fails with this cause, nothing else is kept."""

    def __init__(self, cause: int, message: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message


class RunClosed(Exception):
    """The run is no longer running."""


def require_running(state: _Run) -> None:
    if not state.running:
        raise RunClosed("workflow execution already completed")


class ResetRejected(Exception):
    """A reset point the run's history cannot be reset to; the message says why."""


class InvalidTransition(Exception):
    """A pending thing was moved from a state its transition does not start from: a bug in the rules
    (an internal invariant), never a client's mistake, so it surfaces as INTERNAL."""
