"""What every close of a run shares: the close event, and nothing pending afterwards."""

from __future__ import annotations

from temporalio.api.history.v1 import HistoryEvent

from engine.history import children, updates
from engine.history.mutation import Mutation


def close(m: Mutation, status: int, event: HistoryEvent, *, new_run_id: str = "") -> None:
    """Write the close event and drop everything pending: nothing runs for a closed run.

    `new_run_id`: the run that continues this one (continue-as-new, a retry or the next cron run)."""
    state = m.state
    added = m.add(event)
    state.status = status
    state.close_time = m.now
    state.close_event_id = added.event_id
    if new_run_id:
        state.new_execution_run_id = new_run_id
    children.on_close(m, added)
    updates.on_close(state, continuing=bool(new_run_id))
    state.workflow_task = None
    state.activities = {}
    state.timers = {}
    state.buffered = []
    m.closed = True
