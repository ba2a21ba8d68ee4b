"""Token buckets (perdura.ratelimit): burst, refill, isolation and Redis failure, in memory and on real Redis."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from perdura import ratelimit
from perdura.ratelimit import Rate

from engine.api.ratelimits import NamespaceLimits
from tenants import quotas
from tests.support.servers import REDIS_URL


@pytest.fixture(params=["memory", "redis"])
async def limiter(request):
    if request.param == "memory":
        yield ratelimit.MemoryLimiter()
        return
    limiter = ratelimit.RedisLimiter(REDIS_URL, prefix=f"perdura-test:{uuid.uuid4().hex[:8]}:")
    yield limiter
    await limiter.close()


async def take(limiter, key, rate, n):
    return [(await limiter.acquire(key, rate)).allowed for _ in range(n)]


async def test_a_fresh_bucket_admits_its_burst_then_refuses_with_the_wait(limiter):
    rate = Rate(per_second=10, burst=5)
    assert await take(limiter, "a", rate, 5) == [True] * 5
    refused = await limiter.acquire("a", rate)
    assert not refused.allowed
    # The next token is at most one interval (100 ms) away.
    assert 0 < refused.retry_after <= 0.1


async def test_tokens_refill_at_the_rate(limiter):
    rate = Rate(per_second=20, burst=2)
    assert await take(limiter, "r", rate, 3) == [True, True, False]
    await asyncio.sleep(0.06)  # one interval (50 ms) later: one token, not two
    assert await take(limiter, "r", rate, 2) == [True, False]
    await asyncio.sleep(0.12)  # two intervals: the bucket is full again
    assert await take(limiter, "r", rate, 3) == [True, True, False]


async def test_buckets_are_independent(limiter):
    rate = Rate(per_second=1, burst=2)
    assert await take(limiter, "ns-a:actions", rate, 3) == [True, True, False]
    assert await take(limiter, "ns-b:actions", rate, 2) == [True, True]
    assert await take(limiter, "ns-a:polls", rate, 2) == [True, True]


async def test_a_refused_call_takes_no_token_and_peek_takes_none(limiter):
    rate = Rate(per_second=10, burst=2)
    assert (await limiter.acquire("p", rate, peek=True)).allowed
    assert await take(limiter, "p", rate, 2) == [True, True]
    for _ in range(20):
        assert not (await limiter.acquire("p", rate)).allowed
    assert not (await limiter.acquire("p", rate, peek=True)).allowed
    await asyncio.sleep(0.11)
    # Refusals did not push the bucket further into debt: one interval later a token is there.
    assert (await limiter.acquire("p", rate)).allowed


async def test_redis_buckets_are_shared_between_limiters():
    """Two processes (here: two clients) on the same Redis and prefix draw from the same bucket."""
    prefix = f"perdura-test:{uuid.uuid4().hex[:8]}:"
    one, two = (
        ratelimit.RedisLimiter(REDIS_URL, prefix=prefix),
        ratelimit.RedisLimiter(REDIS_URL, prefix=prefix),
    )
    try:
        rate = Rate(per_second=1, burst=3)
        assert await take(one, "shared", rate, 2) == [True, True]
        assert await take(two, "shared", rate, 2) == [True, False]
    finally:
        await one.close()
        await two.close()


async def test_unreachable_redis_fails_open_onto_local_buckets(caplog):
    limiter = ratelimit.RedisLimiter("redis://127.0.0.1:1/0", timeout=0.2)
    try:
        rate = Rate(per_second=1, burst=2)
        assert await take(limiter, "k", rate, 3) == [True, True, False]
        assert "Redis unreachable" in caplog.text
    finally:
        await limiter.close()


def test_gcra_arithmetic():
    rate = Rate(per_second=4, burst=2)  # 250 ms apart, two at once
    decision, tat = ratelimit.gcra(None, 1_000_000, rate)
    assert decision.allowed
    assert tat == 1_250_000
    decision, tat = ratelimit.gcra(tat, 1_000_000, rate)
    assert decision.allowed
    assert tat == 1_500_000
    decision, same = ratelimit.gcra(tat, 1_000_000, rate)
    assert not decision.allowed
    assert same == tat
    assert decision.retry_after == 0.25
    with pytest.raises(ValueError, match="positive"):
        Rate(per_second=0, burst=1)


def test_gcra_takes_up_to_the_tokens_there():
    rate = Rate(per_second=10, burst=5)  # 100 ms apart, five at once
    taken, wait, tat = ratelimit.gcra_take(None, 1_000_000, rate, 3)
    assert (taken, wait, tat) == (3, 0.0, 1_300_000)
    taken, wait, tat = ratelimit.gcra_take(tat, 1_000_000, rate, 3)
    assert (taken, wait, tat) == (2, 0.0, 1_500_000)  # only two were left
    taken, wait, same = ratelimit.gcra_take(tat, 1_000_000, rate, 3)
    assert (taken, same) == (0, tat)
    assert wait == pytest.approx(0.1)
    # 250 ms later, two and a half intervals have refilled: two whole tokens.
    assert ratelimit.gcra_take(tat, 1_250_000, rate, 5)[:2] == (2, 0.0)
    # Asking for at least three then takes none, and says when three are there (in 50 ms).
    taken, wait, same = ratelimit.gcra_take(tat, 1_250_000, rate, 5, least=3)
    assert (taken, same) == (0, tat)
    assert wait == pytest.approx(0.05)


@pytest.fixture(params=["memory", "redis"])
def sync_limiter(request):
    if request.param == "memory":
        return ratelimit.LockedMemoryLimiter()
    return ratelimit.SyncRedisLimiter(REDIS_URL, prefix=f"perdura-test:{uuid.uuid4().hex[:8]}:")


def test_a_sync_limiter_takes_many_tokens_at_once(sync_limiter):
    rate = Rate(per_second=10, burst=5)
    assert sync_limiter.take("many", rate, 3) == (3, 0.0)
    assert sync_limiter.take("many", rate, 3)[0] == 2
    taken, wait = sync_limiter.take("many", rate, 3)
    assert taken == 0
    assert 0 < wait <= 0.1
    assert not sync_limiter.check("many", rate).allowed
    assert sync_limiter.check("other", rate).allowed
    assert sync_limiter.take("other", rate, 5, least=5)[0] == 0  # four are left, not five
    assert sync_limiter.take("other", rate, 5, least=4) == (4, 0.0)


class CountingRedisLimiter(ratelimit.RedisLimiter):
    """The real Redis limiter, counting the checks that reach Redis."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.asked = 0

    async def acquire(self, key, rate, *, peek=False):
        self.asked += 1
        return await super().acquire(key, rate, peek=peek)


async def test_a_flood_on_a_drained_bucket_asks_redis_about_once_per_token(settings):
    """When a drained bucket's next token comes due, one call asks Redis for it; the calls arriving while
    that answer is on its way are refused locally instead of all asking at once."""
    import time

    from engine.api.ratelimits import NamespaceLimits
    from tenants import quotas

    class DefaultRates(NamespaceLimits):
        async def rates(self, namespace):  # the defaults, without reading the namespace's row
            rates = quotas.namespace_rates(None)
            self._rates[namespace] = (time.monotonic(), rates)
            return rates

    settings.PERDURA_RATE_ACTIONS = 20  # a burst of 40, then one token every 50 ms
    limiter = CountingRedisLimiter(REDIS_URL, prefix=f"perdura-test:{uuid.uuid4().hex[:8]}:")
    limits = DefaultRates(limiter)
    namespace = f"flooded-{uuid.uuid4().hex[:8]}"
    try:
        admitted = 0
        loop = asyncio.get_running_loop()
        stop = loop.time() + 1.0

        async def caller() -> None:
            nonlocal admitted
            while loop.time() < stop:
                if await limits.check(namespace, quotas.Bucket.ACTIONS) is None:
                    admitted += 1
                await asyncio.sleep(0.001)

        began = loop.time()
        await asyncio.gather(*(caller() for _ in range(32)))
        elapsed = loop.time() - began  # a second, and more on a loaded machine (the last calls run late)
    finally:
        await limiter.close()
    # 40 of burst and about 20 refills a second; each refill asked for once (plus the refusals that
    # marked the bucket empty), never once per waiting caller (32 of them, every millisecond).
    refills = 20 * elapsed + 5
    assert 40 <= admitted <= 40 + refills, (admitted, elapsed)
    assert limiter.asked <= 40 + 2 * refills + 32, (limiter.asked, admitted, elapsed)


async def test_many_tokens_at_once_are_as_many_as_are_there(limiter):
    rate = Rate(per_second=10, burst=5)
    assert await limiter.acquire_many("m", rate, 3) == (3, 0.0)
    assert await limiter.acquire_many("m", rate, 3) == (2, 0.0)  # the rest of the burst
    taken, retry_after = await limiter.acquire_many("m", rate, 3)
    assert taken == 0
    assert 0 < retry_after <= 0.1


async def _admitted_in(limits, namespace: str, seconds: float, calls_per_tick: int) -> int:
    """Calls admitted while `calls_per_tick` arrive every millisecond or so for `seconds`."""
    admitted = 0
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    while loop.time() < until:
        for _ in range(calls_per_tick):
            if await limits.check(namespace, quotas.Bucket.ACTIONS) is None:
                admitted += 1
        await asyncio.sleep(0.001)
    return admitted


class _Rates(NamespaceLimits):
    """A namespace's rates given here, without reading its row (the limiter is the real one)."""

    def __init__(self, limiter, actions_rps: float) -> None:
        super().__init__(limiter)
        self.actions_rps = actions_rps

    async def rates(self, namespace):
        return quotas.namespace_rates({"actions": self.actions_rps})


async def test_a_process_takes_redis_tokens_ahead_while_calls_come_fast_and_never_exceeds_the_limit():
    limiter = ratelimit.RedisLimiter(REDIS_URL, prefix=f"perdura-test:{uuid.uuid4().hex[:8]}:")
    round_trips = []
    real = limiter.acquire_many

    async def counted(key, rate, wanted):
        round_trips.append(wanted)
        return await real(key, rate, wanted)

    limiter.acquire_many = counted
    try:
        # 2,000 a second with a burst of 4,000: the flood below stays within it, so every call is admitted.
        limits = _Rates(limiter, 2000.0)
        admitted = await _admitted_in(limits, "ns", 0.5, calls_per_tick=4)
        assert admitted > 200
        assert len(round_trips) < admitted / 4  # most calls spent a token taken ahead
        assert max(round_trips) <= 32  # at most AHEAD_MOST at once (2,000 x 25 ms = 50)

        # 40 a second, a burst of 80: takes ahead are capped to one (40 x 25 ms), and the limit holds.
        round_trips.clear()
        slow = _Rates(limiter, 40.0)
        admitted = await _admitted_in(slow, "ns-slow", 1.0, calls_per_tick=2)
        assert set(round_trips) == {1}
        assert 80 <= admitted <= 80 + 45  # the burst, then the refill of about a second
    finally:
        await limiter.close()
