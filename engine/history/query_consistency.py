"""When a query may go to a worker on its own, and when it must ride the run's workflow task (consistency)."""

from __future__ import annotations

from engine.history.state import MutableState

MAX_BUFFERED_QUERIES = 1
"""Queries one run may hold waiting for its workflow task (Temporal's history.MaxBufferedQueryCount)."""

FAILED_TASK_ATTEMPT = 3
"""From this workflow task attempt on, a new query fails fast: the worker keeps failing the run's task."""


def holds_queries(state: MutableState) -> bool:
    """Whether a query arriving now must wait for the run's workflow task instead of going out alone.

    A workflow task scheduled or running means events the query must see are not yet reflected in the
    worker's copy of the run; the query is held (buffered) and handed out with the next workflow task to
    start, answered in its completion. Before the first workflow task completes, a worker has nothing to
    answer from. Otherwise (no task in flight, or the run closed) a query goes to a worker as a query task.
    """
    return state.running and (
        state.workflow_task is not None or not state.last_completed_wft_started_event_id
    )


def task_attempt(state: MutableState) -> int:
    """The attempt of the run's workflow task (1 when none is in flight)."""
    return state.workflow_task.attempt if state.workflow_task is not None else 1
