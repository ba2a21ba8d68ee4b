"""The retry rule of shard queue rows: when a failed row is tried again, and when it is parked (pure).

No library fits: retry libraries (tenacity, backoff) wrap a call and sleep in-process, while a shard
row's next attempt is a time persisted on the row, so that the processor moves on to the rows behind
it and any worker may make the next attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

ERROR_CHARS = 2000
"""How much of an error a row keeps: enough for the message and its context, never a log's worth."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How failed shard rows are retried."""

    max_attempts: int = 10
    """Attempts (the first included) before the row is parked; PERDURA_SHARD_MAX_ATTEMPTS."""
    initial: timedelta = timedelta(seconds=1)
    """The wait after the first failure; it doubles after each further one."""
    maximum: timedelta = timedelta(minutes=5)
    """The longest wait between two attempts."""


@dataclass(frozen=True, slots=True)
class AfterFailure:
    """What becomes of a row whose processing just raised."""

    failures: int
    """Failed attempts so far, this one included."""
    retry_at: datetime | None
    """When to try again; None when parked."""

    @property
    def parked(self) -> bool:
        return self.retry_at is None


def after_failure(*, failures_before: int, now: datetime, policy: RetryPolicy) -> AfterFailure:
    """The row's next attempt after a failure: `initial * 2**(n-1)` capped at `maximum`, or parked once
    `max_attempts` attempts have failed (a policy of 1 attempt parks at the first failure)."""
    failures = max(failures_before, 0) + 1
    if failures >= max(policy.max_attempts, 1):
        return AfterFailure(failures=failures, retry_at=None)
    # Capping the exponent first keeps the multiplication finite however many failures a row has.
    doublings = min(failures - 1, 62)
    seconds = policy.initial.total_seconds() * (2**doublings)
    delay = min(timedelta(seconds=min(seconds, policy.maximum.total_seconds())), policy.maximum)
    return AfterFailure(failures=failures, retry_at=now + delay)


def describe_error(error: BaseException, *, limit: int = ERROR_CHARS) -> str:
    """`ExceptionType: message`, cut to `limit` characters (an error may quote a huge value)."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
