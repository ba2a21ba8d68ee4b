"""How long one pass over a shard may run: until its time is up or the process is asked to stop.

A pass stops between rows (never inside one): the rows left stay due, for the next pass or the next
owner of the shard. Bounding a pass keeps a shard with a large backlog from holding a worker while
other shards wait, and lets a process stop within seconds of SIGTERM.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

PASS_SECONDS = 5.0

stop_requested = threading.Event()
"""Set when the process is stopping (SIGTERM): every pass in it ends after the row in hand."""


@dataclass(slots=True)
class Budget:
    """The time left to a pass over one shard."""

    seconds: float = PASS_SECONDS
    may_wait: bool = False
    """Whether the pass may sleep for a paced queue's next token (engine/shards/retention_pace.py): a
    worker's pool process may; `perdura dev`'s loop may not, its database thread serves the API too."""
    deadline: float = field(init=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def spent(self) -> bool:
        return stop_requested.is_set() or time.monotonic() >= self.deadline

    def remaining(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0)

    def sleep(self, seconds: float) -> bool:
        """Sleep `seconds` (False at once if the process is asked to stop meanwhile)."""
        return not stop_requested.wait(seconds)

    def slice(self, seconds: float) -> Budget:
        """A part of this budget: `seconds`, or what is left if less."""
        return Budget(min(seconds, self.remaining()), may_wait=self.may_wait)
