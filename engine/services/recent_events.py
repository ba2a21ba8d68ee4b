"""The events this process's last changes to a run wrote, kept in memory for the run's next workflow task.

A sticky worker's workflow task carries the run's events since its previous task: mostly what the last two
changes made here wrote (the completion that scheduled an activity, then the activity's completion and the
task's start). Answering from memory saves the task's history read, its decryption and its parse: on
`perdura dev` a database statement and a fortieth of the CPU of a ten-activity workflow; in production, a
round trip to Postgres on the way to the worker.

Why what is answered is always what the database holds:
- a change is remembered only once its transaction has committed (`transaction.on_commit`);
- a run's events are only ever appended, their ids dense, and none changes once written;
- a run's entry grows only by a change whose first event follows the entry's last, so it is always a
  gapless stretch of the run's history; a change whose first event does not follow (another process
  wrote in between, or this one's callbacks ran out of commit order) starts the entry afresh;
- a read is answered only when the entry holds every event it asks for, up to the last one the caller
  read under the run's lock: an event written elsewhere shows as a gap, and the history is read instead.

A run's close is kept too, so the long poll of an SDK's `result()` is answered its close event from here
(`close_event`). Runs with a data subject are never kept, so an erasure (engine/exports/erasure.py) leaves
no payload of theirs here. Bounded: `MAX_RUNS` runs, each at most `MAX_RUN_BYTES` of events (the oldest go
first). Only processes that answer polls keep anything (`enable`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from django.db import transaction
from temporalio.api.history.v1 import HistoryEvent

from engine.history.mutation import Mutation
from engine.history.subjects import subject_of
from engine.models import Execution

MAX_RUNS = 1024
MAX_RUN_BYTES = 64 * 1024

_enabled = False
_lock = threading.Lock()
_runs: OrderedDict[int, _Entry] = OrderedDict()
"""By the run's row id (unique across namespaces): least recently changed first."""


class _Entry:
    __slots__ = ("events", "sizes", "bytes", "close_event_id")

    def __init__(self) -> None:
        self.events: list[HistoryEvent] = []
        self.sizes: list[int] = []
        self.bytes = 0
        self.close_event_id = 0
        """The run's close event, once a change kept here closed it."""

    def extend(self, events: Sequence[HistoryEvent]) -> None:
        for event in events:
            size = event.ByteSize()
            self.events.append(event)
            self.sizes.append(size)
            self.bytes += size
        drop = 0
        while self.bytes > MAX_RUN_BYTES and drop < len(self.events):
            self.bytes -= self.sizes[drop]
            drop += 1
        if drop:
            del self.events[:drop], self.sizes[:drop]


def enable() -> None:
    """Keep runs' recent events in this process from now on (a process that answers workflow task polls)."""
    global _enabled
    _enabled = True


def remember_on_commit(execution: Execution, m: Mutation) -> None:
    """Inside the transaction that persists `m` on `execution`: remember its events once it commits."""
    if not _enabled or not m.events:
        return
    if subject_of(m.state.search_attributes) is not None:
        return
    run, events = execution.pk, list(m.events)
    close_event_id = m.state.close_event_id if m.closed else 0
    transaction.on_commit(lambda: _remember(run, events, close_event_id))


def _remember(run: int, events: list[HistoryEvent], close_event_id: int = 0) -> None:
    with _lock:
        entry = _runs.get(run)
        if entry is None or not entry.events or entry.events[-1].event_id + 1 != events[0].event_id:
            entry = _Entry()
        entry.extend(events)
        if not entry.events:  # one change over the budget by itself
            _runs.pop(run, None)
            return
        entry.close_event_id = close_event_id
        _runs[run] = entry
        _runs.move_to_end(run)
        while len(_runs) > MAX_RUNS:
            _runs.popitem(last=False)


def history(execution: Execution, first_event_id: int, last_event_id: int) -> list[HistoryEvent] | None:
    """The run's events `first_event_id` through `last_event_id` if all of them are kept here, else None."""
    with _lock:
        entry = _runs.get(execution.pk)
        if entry is None or not entry.events:
            return None
        held_first = entry.events[0].event_id
        held_last = entry.events[-1].event_id
        if first_event_id < held_first or last_event_id > held_last or first_event_id > last_event_id:
            return None
        return entry.events[first_event_id - held_first : last_event_id - held_first + 1]


def close_event(execution: Execution) -> HistoryEvent | None:
    """The closed run's close event, if the change that closed it was kept here, else None."""
    with _lock:
        entry = _runs.get(execution.pk)
        if entry is None or not entry.close_event_id or not entry.events:
            return None
        index = entry.close_event_id - entry.events[0].event_id
        return entry.events[index] if 0 <= index < len(entry.events) else None


def clear() -> None:
    """Forget everything (tests)."""
    with _lock:
        _runs.clear()
