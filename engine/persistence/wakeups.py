"""Which new shard rows deserve a wake-up hint (the rows themselves are the truth, rule 3).

The loop that holds a shard (engine/shards/loop.py) sleeps until its next row is due, looking again at
least every SWEEP_SECONDS. A new row due sooner than that wakes it through the shard's key, published with
the transaction's other wake-ups (NOTIFY on Postgres, in the same statement). A lost hint only delays the
row until the loop looks again.
"""

from __future__ import annotations

from datetime import datetime

from engine import notify
from engine.history.mutation import NewTimer

SWEEP_SECONDS = 1.0
"""How long a shard loop sleeps at most between looks at its shards."""


def timers_created(shard: int, now: datetime, timers: list[NewTimer], keys: dict[str, int]) -> None:
    """Wake the shard's loop for new timers due before its next look."""
    if any((t.fire_at - now).total_seconds() < SWEEP_SECONDS for t in timers):
        keys[notify.shard_key(shard)] = 1


def transfers_created(shard: int, keys: dict[str, int]) -> None:
    """Transfers are due at once: wake the shard's loop."""
    keys[notify.shard_key(shard)] = 1


def schedule_due(shard: int) -> None:
    """Inside the transaction that set a schedule row's wake-up time: wake the shard's loop, which reads
    the time and sleeps until then."""
    notify.publish_on_commit({notify.shard_key(shard): 1})
