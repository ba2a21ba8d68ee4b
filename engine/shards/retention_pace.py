"""How fast retention deletes expired runs: at most PERDURA_RETENTION_RATE runs a second, for the whole
installation.

Deleting a run, and archiving it first, spends database, archive-store and worker CPU that every
tenant's calls also need. Unpaced, one worker deleting a backlog on two cores took another namespace's
start p99 from 68 ms to 231 ms (bench/README.md, "Retention expiry"). So retention takes a token per run
from one bucket (perdura.ratelimit: in Redis when PERDURA_RATE_LIMITS is `redis`, so the rate holds
however many workers run; in memory otherwise) before it touches a group, and a backlog drains at the
rate rather than as fast as the machine allows. A namespace purge (engine/shards/namespace_purge.py)
goes through the same path and the same bucket.

A group takes the tokens there, at least a fifth of a second's worth and at most a second's worth (and
at most GROUP_MOST runs). A group's time is mostly its round trips (a put and a get for each run at once,
100-400 ms on radosgw however few), so groups follow the store's latency and the rate is met in even
steps. (Groups of a tenth or a quarter of a second's worth at most fell short of the rate, at 25-28
runs/s for 40: two pool processes took turns at groups of the one or two tokens there.) When
the bucket is empty, a worker's pass waits for the next token if it comes within the pass's slice
(engine/shards/budget.py `may_wait`); otherwise retention is not due on this process until the next
token: the pass moves on to its other queues, and the sweep queues no shard for retention alone.
`perdura dev`'s loop never waits (its database thread serves the API) and comes back at the next token.
"""

from __future__ import annotations

import math
import time

from django.conf import settings
from perdura import ratelimit

KEY = "retention:runs"
GROUPS_PER_SECOND = 1
GROUP_MOST = 100
"""The largest group, paced or not: one statement a table deletes up to this many runs' rows."""
LEAST_GROUP_SECONDS = 0.2

_empty_until = 0.0
"""Monotonic time before which this process knows the bucket is empty (no store asked until then)."""


def per_second() -> float | None:
    """The rate; None: unpaced (PERDURA_RETENTION_RATE=0)."""
    rate = float(settings.PERDURA_RETENTION_RATE)
    return rate if rate > 0 else None


def group_size() -> int:
    """How many runs a group takes at most: a second's worth, at least one, at most GROUP_MOST."""
    rate = per_second()
    return GROUP_MOST if rate is None else max(1, min(GROUP_MOST, int(rate / GROUPS_PER_SECOND)))


def _limiter() -> ratelimit.SyncLimiter:
    # The rate limits' store and key prefix; with rate limits off, this process's memory.
    backend = "memory" if settings.PERDURA_RATE_LIMITS == "off" else settings.PERDURA_RATE_LIMITS
    return ratelimit.shared_sync(
        backend,
        redis_url=settings.PERDURA_REDIS_URL,
        prefix=f"perdura:rl:{settings.DATABASES['default']['NAME']}:",
    )


def least_group() -> int:
    """The fewest runs a group waits for: a fifth of a second's worth. A group's time is mostly fixed
    (its round trips), so groups of the one or two tokens that came in meanwhile fell far short of the
    rate (25 runs/s for 40, with two pool processes taking turns)."""
    rate = per_second()
    return 1 if rate is None else max(1, min(GROUP_MOST, int(rate * LEAST_GROUP_SECONDS)))


def _rate(rate: float) -> ratelimit.Rate:
    # A sweep's worth of tokens may gather, so that a pace below one group a pass still holds between
    # sweeps; a pass that drains the bucket keeps it near empty, so bursts come only after a gap.
    return ratelimit.Rate(
        per_second=rate, burst=max(group_size(), math.ceil(rate * settings.PERDURA_SWEEP_SECONDS))
    )


def take(wanted: int) -> int:
    """Take up to `wanted` runs' tokens (no more than a group's); how many may be deleted now."""
    global _empty_until
    rate = per_second()
    if rate is None:
        return wanted
    if wanted < 1 or seconds_to_token() > 0:
        return 0
    size = min(wanted, group_size())
    taken, wait = _limiter().take(KEY, _rate(rate), size, least=min(size, least_group()))
    if not taken:
        _empty_until = time.monotonic() + wait
    return taken


def seconds_to_token() -> float:
    """How long until the next token as this process last heard (0: there may be one now)."""
    if per_second() is None:
        return 0.0
    return max(_empty_until - time.monotonic(), 0.0)


def ready() -> bool:
    """Whether a token may be there (False only while this process knows the bucket is empty)."""
    return seconds_to_token() == 0.0


def reset() -> None:
    """Forget what this process knows of the bucket, and its memory buckets (tests change the rate)."""
    global _empty_until
    _empty_until = 0.0
    ratelimit.forget_shared()
