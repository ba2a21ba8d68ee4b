"""Token buckets (GCRA) kept in Redis, shared by every process, or in process memory; they know nothing of tenants.

The algorithm is GCRA (the generic cell rate algorithm), which is a token bucket stored as one number
per key: the "theoretical arrival time" (TAT) at which the bucket would be full again. A `Rate` of
`per_second` tokens with room for `burst` of them admits a call when ``TAT + interval - burst *
interval <= now`` and then moves TAT on by one interval; a refused call learns exactly when the next
token comes (its retry-after). State is one small key per bucket, expiring as soon as the bucket is
full, so idle namespaces cost nothing.

`RedisLimiter` runs the whole check as one Lua script (loaded once, called with EVALSHA; redis-py
reloads it on NOSCRIPT) on Redis's own clock, so every `perdura api` replica shares each bucket and
no clock skew between replicas matters. `MemoryLimiter` is the same arithmetic for `perdura dev` and
for tests. The libraries we looked at (`limits`: fixed/moving/sliding windows; `pyrate-limiter`: a
sorted-set log of every hit) offer no token bucket or GCRA, and window logs cost O(rate) memory per
key; the algorithm is twenty lines, so it lives here.

When Redis fails, `RedisLimiter` fails *open onto local buckets*: each process enforces the same
rates in its own memory (so N replicas admit at most N times a namespace's rate) and logs a warning
at most every 30 seconds; it tries Redis again after a second. Rate limits protect tenants from one
another, not the data, and refusing every call while Redis is away would turn a cache outage into a
full outage.

The REST API (sync Django views in threads or gunicorn workers) draws from the same stores through
`SyncLimiter` (`build_sync`): the same script on the same Redis and key prefix with redis-py's blocking
client, or the same arithmetic in memory behind a lock.
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("perdura.ratelimit")

REDIS_RETRY_SECONDS = 1.0
"""After a Redis error, buckets stay local this long before Redis is tried again."""
WARN_EVERY_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Rate:
    """A bucket's size: `per_second` tokens refill each second, at most `burst` are kept."""

    per_second: float
    burst: int

    def __post_init__(self) -> None:
        if not self.per_second > 0:
            raise ValueError(f"a rate must be positive, not {self.per_second!r}")
        if self.burst < 1:
            raise ValueError(f"a burst must be at least 1, not {self.burst!r}")

    @property
    def interval_us(self) -> int:
        """Microseconds between two tokens."""
        return max(1, round(1_000_000 / self.per_second))

    @property
    def tolerance_us(self) -> int:
        """How far ahead of now the bucket may be spent (GCRA's burst tolerance)."""
        return self.interval_us * self.burst


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer of one check: allowed, or refused until `retry_after` seconds have passed."""

    allowed: bool
    retry_after: float = 0.0


ALLOWED = Decision(True)


def gcra_take(
    tat_us: int | None, now_us: int, rate: Rate, wanted: int, least: int = 1
) -> tuple[int, float, int]:
    """Take between `least` and `wanted` tokens at once, as many as are there: (tokens taken, seconds
    until `least` are there when fewer were, the bucket's new TAT). Pure. With `wanted` 1 it is GCRA's
    admit-or-refuse step (`gcra`). `least` is at most `wanted` and should be at most the burst.

    The Lua script of `RedisLimiter` is the same arithmetic; keep them in step.
    """
    least = min(least, wanted)
    tat = now_us if tat_us is None or tat_us < now_us else tat_us
    taken = min(wanted, (now_us + rate.tolerance_us - tat) // rate.interval_us)
    if taken < max(least, 1):
        return 0, (tat + max(least, 1) * rate.interval_us - rate.tolerance_us - now_us) / 1_000_000, tat
    return taken, 0.0, tat + taken * rate.interval_us


def gcra(tat_us: int | None, now_us: int, rate: Rate) -> tuple[Decision, int]:
    """One GCRA step: the decision and the bucket's new TAT (unchanged when refused). Pure."""
    taken, retry_after, tat = gcra_take(tat_us, now_us, rate, 1)
    return (ALLOWED if taken else Decision(False, retry_after)), tat


class Limiter(abc.ABC):
    """Where the buckets live. Keys are opaque strings; callers choose them (namespace and bucket)."""

    @abc.abstractmethod
    async def acquire(self, key: str, rate: Rate, *, peek: bool = False) -> Decision:
        """Take one token from the bucket `key` of size `rate`.

        Args:
            key: the bucket's name.
            rate: its size; a bucket seen for the first time starts full.
            peek: only say whether a token is there, without taking it.

        Returns:
            Allowed, or refused with the seconds until a token is there. Never raises for a backend
            failure: a limiter that cannot reach its store decides by itself (see the module docstring).
        """

    remote = False
    """Whether each take is a round trip to a store other processes share (worth taking tokens ahead)."""

    async def acquire_many(self, key: str, rate: Rate, wanted: int) -> tuple[int, float]:
        """Take between one and `wanted` tokens from the bucket `key` at once, as many as are there
        (`gcra_take`): (tokens taken, seconds until one is there when none was). Never raises for a
        backend failure. A limiter that cannot take several at once takes one."""
        decision = await self.acquire(key, rate)
        return (1, 0.0) if decision.allowed else (0, decision.retry_after)

    async def close(self) -> None:  # noqa: B027 (optional hook: only the Redis limiter holds connections)
        """Release connections (the memory limiter has none)."""


class MemoryLimiter(Limiter):
    """Buckets in this process's memory: `perdura dev`, tests, and the fallback while Redis is down.

    Only the event loop's thread touches it (grpc.aio handlers run there), so no lock is needed.
    """

    PRUNE_AT = 10_000

    def __init__(self, clock_us: Callable[[], int] | None = None) -> None:
        self._tats: dict[str, int] = {}
        self._clock_us = clock_us or (lambda: time.monotonic_ns() // 1000)

    def check(self, key: str, rate: Rate, *, peek: bool = False) -> Decision:
        """`acquire` without the coroutine: the arithmetic on this process's clock."""
        taken, retry_after = self.take(key, rate, 1, peek=peek)
        return ALLOWED if taken else Decision(False, retry_after)

    def take(
        self, key: str, rate: Rate, wanted: int, *, least: int = 1, peek: bool = False
    ) -> tuple[int, float]:
        """Between `least` and `wanted` tokens of the bucket `key` (`gcra_take`): (tokens taken, seconds
        until `least` are there when fewer were)."""
        now = self._clock_us()
        taken, retry_after, tat = gcra_take(self._tats.get(key), now, rate, wanted, least)
        if taken and not peek:
            if len(self._tats) >= self.PRUNE_AT:
                # A bucket whose TAT has passed is full: forgetting it changes no answer.
                self._tats = {k: v for k, v in self._tats.items() if v > now}
            self._tats[key] = tat
        return taken, retry_after

    async def acquire(self, key: str, rate: Rate, *, peek: bool = False) -> Decision:
        return self.check(key, rate, peek=peek)

    async def acquire_many(self, key: str, rate: Rate, wanted: int) -> tuple[int, float]:
        return self.take(key, rate, wanted)


# KEYS[1]: the bucket; ARGV: interval (µs), burst tolerance (µs), "1" to peek, tokens wanted, at least.
# Returns {tokens taken, retry µs when none}: `gcra_take`'s arithmetic, on Redis's TIME, the clock
# every replica shares. Numbers stay below 2^53, exact in Lua's doubles; '%.0f' writes the TAT without
# the exponent tostring() would use.
GCRA_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local wanted = tonumber(ARGV[4] or '1')
local least = math.max(math.min(tonumber(ARGV[5] or '1'), wanted), 1)
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local taken = math.min(wanted, math.floor((now + tolerance - tat) / interval))
if taken < least then
  return {0, tat + least * interval - tolerance - now}
end
if ARGV[3] ~= '1' then
  local new_tat = tat + taken * interval
  redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1000)
end
return {taken, 0}
"""


class RedisLimiter(Limiter):
    """Buckets in Redis, shared by every process that uses the same Redis and prefix."""

    def __init__(self, url: str, *, prefix: str = "perdura:rl:", timeout: float = 0.25) -> None:
        import redis.asyncio

        self._redis = redis.asyncio.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=30
        )
        self._script = self._redis.register_script(GCRA_SCRIPT)
        self._prefix = prefix
        self.fallback = MemoryLimiter()
        self._down_until = 0.0
        self._warned_at = -WARN_EVERY_SECONDS

    remote = True

    async def acquire(self, key: str, rate: Rate, *, peek: bool = False) -> Decision:
        taken, retry_after = await self._take(key, rate, 1, peek=peek)
        return ALLOWED if taken else Decision(False, retry_after)

    async def acquire_many(self, key: str, rate: Rate, wanted: int) -> tuple[int, float]:
        return await self._take(key, rate, wanted, peek=False)

    async def _take(self, key: str, rate: Rate, wanted: int, *, peek: bool) -> tuple[int, float]:
        now = time.monotonic()
        if now < self._down_until:
            return self.fallback.take(key, rate, wanted, peek=peek)
        try:
            taken, retry_us = await self._script(
                keys=[self._prefix + key],
                args=[rate.interval_us, rate.tolerance_us, "1" if peek else "0", wanted],
            )
        except Exception as e:  # redis errors, timeouts, refused connections: all mean "Redis is away"
            self._down_until = now + REDIS_RETRY_SECONDS
            if now - self._warned_at >= WARN_EVERY_SECONDS:
                self._warned_at = now
                log.warning(
                    "rate limits: Redis unreachable (%s: %s); enforcing them per process until it is back",
                    type(e).__name__,
                    e,
                )
            return self.fallback.take(key, rate, wanted, peek=peek)
        return int(taken), int(retry_us) / 1_000_000

    async def close(self) -> None:
        await self._redis.aclose()


class Unlimited(Limiter):
    """No limits at all (`PERDURA_RATE_LIMITS=off`)."""

    async def acquire(self, key: str, rate: Rate, *, peek: bool = False) -> Decision:
        return ALLOWED

    async def acquire_many(self, key: str, rate: Rate, wanted: int) -> tuple[int, float]:
        return wanted, 0.0


BACKENDS = ("redis", "memory", "off")


def build(backend: str, *, redis_url: str = "", prefix: str = "perdura:rl:") -> Limiter:
    """The limiter named by PERDURA_RATE_LIMITS: `redis` (shared), `memory` (this process) or `off`."""
    if backend == "redis":
        return RedisLimiter(redis_url, prefix=prefix)
    if backend == "memory":
        return MemoryLimiter()
    if backend == "off":
        return Unlimited()
    raise ValueError(f"PERDURA_RATE_LIMITS must be one of {', '.join(BACKENDS)}, not {backend!r}")


# --- the same buckets for synchronous callers (the REST API's views) ---------------------------------


class SyncLimiter(abc.ABC):
    """`Limiter` for threads: the same buckets and answers, without an event loop."""

    def check(self, key: str, rate: Rate) -> Decision:
        """Take one token from the bucket `key`; never raises for a backend failure (see `Limiter`)."""
        taken, retry_after = self.take(key, rate, 1)
        return ALLOWED if taken else Decision(False, retry_after)

    @abc.abstractmethod
    def take(self, key: str, rate: Rate, wanted: int, *, least: int = 1) -> tuple[int, float]:
        """Take between `least` and `wanted` tokens from the bucket `key` at once, as many as are there
        (`gcra_take`): (tokens taken, seconds until `least` are there when fewer were). Never raises for a
        backend failure (see `Limiter`)."""


class LockedMemoryLimiter(SyncLimiter):
    """`MemoryLimiter` shared by a process's threads (`perdura dev`'s web server, tests)."""

    def __init__(self) -> None:
        self._memory = MemoryLimiter()
        self._lock = threading.Lock()

    def take(self, key: str, rate: Rate, wanted: int, *, least: int = 1) -> tuple[int, float]:
        with self._lock:
            return self._memory.take(key, rate, wanted, least=least)


class SyncRedisLimiter(SyncLimiter):
    """`RedisLimiter` with redis-py's blocking client: the same script, keys and fallback."""

    def __init__(self, url: str, *, prefix: str = "perdura:rl:", timeout: float = 0.25) -> None:
        import redis

        self._redis = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._script = self._redis.register_script(GCRA_SCRIPT)
        self._prefix = prefix
        self.fallback = LockedMemoryLimiter()
        self._down_until = 0.0
        self._warned_at = -WARN_EVERY_SECONDS

    def take(self, key: str, rate: Rate, wanted: int, *, least: int = 1) -> tuple[int, float]:
        now = time.monotonic()
        if now < self._down_until:
            return self.fallback.take(key, rate, wanted, least=least)
        try:
            taken, retry_us = self._script(
                keys=[self._prefix + key], args=[rate.interval_us, rate.tolerance_us, "0", wanted, least]
            )
        except Exception as e:  # as RedisLimiter: any failure means "Redis is away"
            self._down_until = now + REDIS_RETRY_SECONDS
            if now - self._warned_at >= WARN_EVERY_SECONDS:
                self._warned_at = now
                log.warning(
                    "rate limits: Redis unreachable (%s: %s); enforcing them per process until it is back",
                    type(e).__name__,
                    e,
                )
            return self.fallback.take(key, rate, wanted, least=least)
        return int(taken), int(retry_us) / 1_000_000


class SyncUnlimited(SyncLimiter):
    def take(self, key: str, rate: Rate, wanted: int, *, least: int = 1) -> tuple[int, float]:
        return wanted, 0.0


def build_sync(backend: str, *, redis_url: str = "", prefix: str = "perdura:rl:") -> SyncLimiter:
    """The synchronous limiter named by PERDURA_RATE_LIMITS (see `build`)."""
    if backend == "redis":
        return SyncRedisLimiter(redis_url, prefix=prefix)
    if backend == "memory":
        return LockedMemoryLimiter()
    if backend == "off":
        return SyncUnlimited()
    raise ValueError(f"PERDURA_RATE_LIMITS must be one of {', '.join(BACKENDS)}, not {backend!r}")


_shared: dict[tuple[str, str, str], SyncLimiter] = {}
_shared_lock = threading.Lock()


def shared_sync(backend: str, *, redis_url: str = "", prefix: str = "perdura:rl:") -> SyncLimiter:
    """This process's one synchronous limiter for that store and prefix (`build_sync`, built once)."""
    config = (backend, redis_url, prefix)
    with _shared_lock:
        if config not in _shared:
            _shared[config] = build_sync(backend, redis_url=redis_url, prefix=prefix)
        return _shared[config]


def forget_shared() -> None:
    """Drop the limiters `shared_sync` built, and their memory buckets (tests change rates)."""
    with _shared_lock:
        _shared.clear()
