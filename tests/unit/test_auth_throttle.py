"""Failed API-key attempts are throttled per client address (engine/api/auth.py)."""

from __future__ import annotations

import grpc
import pytest
from perdura.ratelimit import MemoryLimiter

from engine.api.auth import LOOPBACK, REQUIRED, AuthInterceptor, source_of


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class Context:
    def __init__(self, peer: str) -> None:
        self._peer = peer

    def peer(self) -> str:
        return self._peer

    async def abort(self, code, message, trailing_metadata=()):  # noqa: ARG002
        raise Aborted(code, message)


async def attempt(interceptor: AuthInterceptor, peer: str) -> grpc.StatusCode:
    # A malformed Perdura key: refused without a database lookup, and counted as a failure. (Something
    # that is not meant as a Perdura key at all is ignored under the loopback allowance.)
    with pytest.raises(Aborted) as caught:
        await interceptor._principal("Bearer pdk_not-a-key", Context(peer), "StartWorkflowExecution")
    return caught.value.code


async def test_an_address_that_keeps_failing_is_refused_before_its_key_is_looked_at():
    interceptor = AuthInterceptor(REQUIRED, failures=MemoryLimiter(), failure_burst=3)
    codes = [await attempt(interceptor, "ipv4:10.1.2.3:5000") for _ in range(6)]
    assert codes[:4] == [grpc.StatusCode.UNAUTHENTICATED] * 4
    assert codes[4:] == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 2
    # Another address (any port of it counts as the same source) is unaffected.
    assert await attempt(interceptor, "ipv4:10.9.9.9:5000") == grpc.StatusCode.UNAUTHENTICATED
    assert await attempt(interceptor, "ipv4:10.1.2.3:6000") == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_loopback_is_not_counted_where_the_loopback_allowance_trusts_it():
    interceptor = AuthInterceptor(LOOPBACK, failures=MemoryLimiter(), failure_burst=1)
    codes = [await attempt(interceptor, "ipv4:127.0.0.1:5000") for _ in range(5)]
    assert codes == [grpc.StatusCode.UNAUTHENTICATED] * 5
    strict = AuthInterceptor(REQUIRED, failures=MemoryLimiter(), failure_burst=1)
    codes = [await attempt(strict, "ipv4:127.0.0.1:5000") for _ in range(3)]
    assert codes[-1] == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_source_of_a_peer():
    assert source_of("ipv4:10.0.0.7:5000") == "10.0.0.7"
    assert source_of("ipv6:[::1]:5000") == "::1"
    assert source_of("unix:/tmp/s") == "unix:/tmp/s"
