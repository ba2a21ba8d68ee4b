"""Retention rules: when a closed run's deletion is due, and the order of its deletion steps (pure)."""

from __future__ import annotations

import enum
from datetime import datetime, timedelta


class Step(enum.IntEnum):
    """A step of an expired run's retention, in the order they run.

    ARCHIVE comes first and deletes nothing: when the namespace archives histories it writes and
    verifies the run's archive, and no deletion step runs before it is done. Then the visibility record
    goes, so the run stops being listed before anything it points at disappears; the run's row goes
    last, so until then the retention row (which cascades from it) and the run both say that a deletion
    is under way.

    The values are stored (Retention.step). ARCHIVE took 0, the value of a row not started yet, and moved
    the deletion steps up by one: a row stored mid-deletion before archival existed resumes one step
    early, which deletes nothing more (every step is idempotent), and is never archived half-deleted.
    """

    ARCHIVE = 0
    VISIBILITY = 1
    HISTORY = 2
    TASKS = 3
    QUERIES = 4
    TIMERS = 5
    TRANSFERS = 6
    RUN = 7


FALLBACK_RETENTION = timedelta(days=1)
"""What a run is kept for if its namespace's stored retention is not positive (a row edited by hand):
a close never fails for want of a retention."""

BATCH_ROWS = 500
"""Rows one step deletes in one transaction at most: a long history goes in several transactions."""


def due_at(close_time: datetime, retention: timedelta) -> datetime:
    """When a run closed at `close_time` in a namespace keeping closed runs for `retention` expires.

    Raises:
        ValueError: `close_time` is naive, or `retention` is not positive.
    """
    if close_time.tzinfo is None:
        raise ValueError("close_time must be an aware datetime")
    if retention <= timedelta(0):
        raise ValueError(f"retention must be positive, not {retention}")
    return close_time + retention


def effective(retention: timedelta | None) -> timedelta:
    """The retention to apply: the namespace's, or FALLBACK_RETENTION when it is missing or not positive."""
    return retention if retention is not None and retention > timedelta(0) else FALLBACK_RETENTION


def after(step: Step, *, deleted: int, batch: int = BATCH_ROWS) -> Step | None:
    """The step to run next after one transaction of `step` deleted `deleted` rows of a batch of `batch`.

    A full batch may have left rows behind, so the step runs again; a short one finished it. The
    archive, visibility and run steps are single steps and always finish. None: the run is gone.
    """
    if step not in (Step.ARCHIVE, Step.VISIBILITY, Step.RUN) and deleted >= batch:
        return step
    return None if step is Step.RUN else Step(step + 1)
