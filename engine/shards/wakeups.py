"""Timer wake-ups: hints that a timer row will come due (the rows themselves are the truth, rule 3).

In `perdura dev` the in-process timer loop hears about new timers through the notify hub. With
Celery shard workers, each new timer also sends a task with an ETA at its fire time; a lost
message only delays the timer until the beat sweep finds the row.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction


def timers_created(shard: int, earliest: datetime) -> None:
    if getattr(settings, "PERDURA_TIMER_WAKEUPS", "") != "celery":
        return

    def send() -> None:
        from engine import tasks

        try:
            tasks.process_shard.apply_async(args=[shard], eta=earliest)
        except Exception:  # noqa: BLE001 - a lost hint is caught by the sweep
            pass

    transaction.on_commit(send)
