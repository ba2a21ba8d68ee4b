"""What every close of a run shares: the close event, and nothing pending afterwards."""

from __future__ import annotations

from temporalio.api.history.v1 import HistoryEvent

from engine.history import children, updates
from engine.history.errors import RunClosed
from engine.history.mutation import Mutation
from engine.history.state import MutableState


def close(m: Mutation, status: int, event: HistoryEvent) -> None:
    """Write the close event and drop everything pending: nothing runs for a closed run."""
    state = m.state
    added = m.add(event)
    state.status = status
    state.close_time = m.now
    state.close_event_id = added.event_id
    children.on_close(m, added)
    updates.on_close(state)
    state.workflow_task = None
    state.activities = {}
    state.timers = {}
    state.buffered = []
    m.closed = True


def require_running(state: MutableState) -> None:
    if not state.running:
        raise RunClosed("workflow execution already completed")
