"""Timer wake-ups: hints that a timer row will come due (the rows themselves are the truth, rule 3).

In `perdura dev` the in-process timer loop hears about new timers through the notify hub. With
Celery shard workers, each new timer also sends a task with an ETA at its fire time; a lost
message only delays the timer until the beat sweep finds the row.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.conf import settings
from django.db import transaction

from engine import notify
from engine.history.mutation import NewTimer, TimerKind

log = logging.getLogger(__name__)
SWEEP_SECONDS = 1.0


# Timers that must fire on time (a workflow sleeping 2 s expects 2 s). Timeouts only guard against
# lost workers: the periodic sweep (within PERDURA_SWEEP_SECONDS) is precise enough for them, and
# skipping their hints spares a wake-up for every task started.
_PRECISE = {TimerKind.USER_TIMER, TimerKind.WORKFLOW_RUN_TIMEOUT, TimerKind.WORKFLOW_BACKOFF}


def timers_created(shard: int, now: datetime, timers: list[NewTimer], keys: dict[str, int]) -> None:
    """Hint the timer processors about new timers that need a wake-up before their next sweep."""
    precise = [t.fire_at for t in timers if t.kind in _PRECISE]
    if getattr(settings, "PERDURA_TIMER_WAKEUPS", "") != "celery":
        # perdura dev: its timer loop sleeps at most a second; wake it for anything due sooner.
        if any((t.fire_at - now).total_seconds() < SWEEP_SECONDS for t in timers):
            keys[notify.TIMERS_KEY] = 1
        return
    if not precise:
        return
    earliest = min(precise)
    transaction.on_commit(lambda: _send(shard, earliest))


def transfers_created(shard: int, keys: dict[str, int]) -> None:
    """Transfers are due at once: wake the in-process loop, or send the shard's worker a message."""
    if getattr(settings, "PERDURA_TIMER_WAKEUPS", "") != "celery":
        keys[notify.TIMERS_KEY] = 1
        return

    transaction.on_commit(lambda: _send(shard, None))


BROKER_PAUSE_SECONDS = 5.0
"""After a hint could not be sent, how long this process sends none (the sweep fires what is due)."""
_paused_until = 0.0


def _send(shard: int, eta: datetime | None) -> None:
    """Send one hint, once: no publish retries, and none at all for a while after a failure. Hints run after
    commit on the API's database threads, and Celery's default retries would hold each of them for most of
    a second while the broker is down; a lost hint only waits for the sweep."""
    global _paused_until
    if time.monotonic() < _paused_until:
        return
    from engine import tasks

    try:
        tasks.process_shard.apply_async(args=[shard], eta=eta, retry=False)
    except Exception as e:  # noqa: BLE001 - a lost hint is caught by the sweep
        _paused_until = time.monotonic() + BROKER_PAUSE_SECONDS
        log.warning("timer wake-ups paused for %.0fs: the broker refused one (%s)", BROKER_PAUSE_SECONDS, e)
