"""Per-namespace and per-key rate limits on the gRPC API (an aio interceptor after the auth interceptor).

A call whose row in the method table (engine/api/methods.py) names a bucket takes one token from
that bucket of its API key in the request's namespace, then one from the namespace's own, before its
handler runs (tenants/quotas.py gives both rates); an empty bucket answers RESOURCE_EXHAUSTED with the
ResourceExhaustedFailure Temporal's frontend sends (cause RPS_LIMIT, scope NAMESPACE), which the SDKs
retry with backoff, and a message naming the limit hit: the namespace's, worded as Temporal's, or the
key's, by its public prefix. Callers without a key (`perdura dev`'s loopback allowance) draw on the
namespace alone. A poll takes its token when the request
arrives: a poller that then waits for a task holds nothing, as Temporal limits poll requests per
second. The rates come from tenants/quotas.py (defaults and the namespace's overrides), read from
the database at most every few seconds per namespace and process.

A flood is refused twice as cheaply as it is checked: once a bucket is found empty, the process knows
until when, and `ShedInterceptor` (the first interceptor) refuses the namespace's (or the key's) calls
of that bucket from their `temporal-namespace` (and `authorization`) header alone (the SDKs send it with every call, as Temporal's frontend
reads it): no decoding, no key lookup, no audit context. It refuses only what the full path would,
and spends no token, so it gives no one a way to starve a namespace. Calls without the header take
the full path, whose refusal is also answered without raising.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass
from typing import Any, cast

import grpc
from perdura import metrics
from perdura.ratelimit import Decision, Limiter
from temporalio.api.enums.v1 import ResourceExhaustedCause, ResourceExhaustedScope
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure

from engine import dbthreads
from engine.api import methods
from engine.api.aio_types import Continuation, Handler, unary_behavior
from engine.api.auth import current
from engine.api.errors import refuse
from engine.errors import ResourceExhausted
from tenants import api_keys, quotas
from tenants.auth import ANONYMOUS, Principal
from tenants.models import Namespace

log = logging.getLogger("perdura.ratelimit")
FLOOD_OVER_SECONDS = 1.0
"""A bucket that refused no call for this long is asked freely again, not one call at a time."""
NAMESPACE_HEADER = "temporal-namespace"
"""The metadata key that names a call's namespace (sent by the SDKs and the CLI with every call)."""
KEY_WARN_EVERY_SECONDS = 60.0
"""A key over its limit is logged (by prefix) at most this often per bucket and namespace."""
HOLD_SECONDS = 0.025
"""How long tokens taken ahead from a shared bucket stay spendable here. Each take from Redis is a round
trip, about 5% of the api's GIL time under load; taking a few at once while calls come fast saves most of
them. A take asks for at most `_ahead_most` tokens, what the bucket refills in this time. Tokens that lapse
unspent were never admitted, so no limit is ever exceeded; a bucket shared by several replicas may admit
that many fewer calls while they lapse."""
AHEAD_MOST = 32
RATES_TTL_SECONDS = 5.0
"""How long a process uses a namespace's rates before reading them again (overrides apply this fast)."""


def _ahead_most(rps: float) -> int:
    """The most tokens taken ahead from a bucket of `rps`: what it refills in HOLD_SECONDS (at least one,
    at most AHEAD_MOST), a sliver of its burst (quotas.BURST_SECONDS of tokens)."""
    return max(1, min(AHEAD_MOST, int(rps * HOLD_SECONDS)))


def _overrides(name: str) -> dict[str, float] | None:
    row = Namespace.objects.filter(name=name).values_list("rate_limits", flat=True).first()
    return row or None


class Limit(enum.StrEnum):
    """Whose bucket refused a call: the namespace's, or the calling API key's in that namespace."""

    NAMESPACE = "namespace"
    KEY = "key"


@dataclass(frozen=True, slots=True)
class Draw:
    """One bucket a call takes a token from: whose it is, and its key in the shared limiter."""

    limit: Limit
    namespace: str
    bucket: quotas.Bucket
    prefix: str = ""
    """The API key's public prefix, for a key's bucket."""

    @property
    def key(self) -> str:
        if self.limit is Limit.KEY:
            return quotas.key_bucket_key(self.prefix, self.namespace, self.bucket)
        return quotas.bucket_key(self.namespace, self.bucket)


def draws(namespace: str, bucket: quotas.Bucket, principal: Principal) -> tuple[Draw, ...]:
    """The buckets a call of `principal` on `namespace` takes a token from, in order. Pure.

    The key's bucket comes first, so a key over its own limit is refused before it spends a token of
    its namespace's: a looping key drains only itself. A caller without a key (the loopback allowance)
    draws on the namespace alone.
    """
    own = Draw(Limit.NAMESPACE, namespace, bucket)
    if principal.anonymous or not principal.prefix:
        return (own,)
    return (Draw(Limit.KEY, namespace, bucket, principal.prefix), own)


def exhausted(draw: Draw, rps: float, decision: Decision) -> ResourceExhausted:
    """The error of a refused call, naming the limit that was hit.

    A namespace's refusal is worded and detailed as Temporal's namespace RPS limit ("namespace rate
    limit exceeded", cause RPS_LIMIT, scope NAMESPACE), which the SDKs retry with backoff; a key's has
    the same details (Temporal has no per-key scope; the key's limit is a share of the namespace's) and
    names the key by its public prefix, never its secret.
    """
    retry = f"retry in {max(decision.retry_after, 0.001):.3f}s"
    if draw.limit is Limit.KEY:
        message = (
            f"API key rate limit exceeded: key {api_keys.display(draw.prefix)} allows {rps:g} "
            f"{draw.bucket.value} requests per second in namespace {draw.namespace!r} (the namespace's own "
            f"limit is not the one hit); {retry}"
        )
    else:
        message = (
            f"namespace rate limit exceeded: namespace {draw.namespace!r} allows {rps:g} "
            f"{draw.bucket.value} requests per second; {retry}"
        )
    return ResourceExhausted(
        message,
        ResourceExhaustedFailure(
            cause=ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT,
            scope=ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
        ),
    )


_key_warned: dict[str, float] = {}


def _count_refusal(draw: Draw) -> None:
    label = metrics.namespace_label(draw.namespace)
    if draw.limit is Limit.NAMESPACE:
        metrics.rate_limit_refusals.labels(label, draw.bucket.value).inc()
        return
    # Keys are not a label (unbounded series); the log names the key, at most once a minute each.
    metrics.key_rate_limit_refusals.labels(label, draw.bucket.value).inc()
    now = time.monotonic()
    if now - _key_warned.get(draw.key, -KEY_WARN_EVERY_SECONDS) >= KEY_WARN_EVERY_SECONDS:
        if len(_key_warned) > 10_000:
            _key_warned.clear()
        _key_warned[draw.key] = now
        log.warning(
            "API key %s is over its %s rate limit in namespace %s; refusing its calls",
            api_keys.display(draw.prefix),
            draw.bucket.value,
            draw.namespace,
        )


class NamespaceLimits:
    """Checks the buckets of a call (its key's and its namespace's): rates cached per process, and the
    shared limiter."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter
        self._rates: dict[str, tuple[float, quotas.NamespaceRates]] = {}
        self._empty_until: dict[str, tuple[float, float]] = {}
        """Buckets known to be empty: until when (monotonic), and their rate. A bucket's next token time
        only moves forward, so refusing locally until then gives the answer the limiter would, without
        asking it: a flood costs one shared-bucket check per token, not one per call."""
        self._probing: set[str] = set()
        """Buckets known empty whose next token one call is asking the limiter for right now."""
        self._refused_at: dict[str, float] = {}
        """When each of those buckets last refused a call locally: a flood still going on."""
        self._held: dict[str, tuple[int, float]] = {}
        """Tokens taken ahead from a shared bucket (remote limiter), this process's to spend: how many, and
        until when (monotonic)."""
        self._ahead: dict[str, int] = {}
        """How many tokens a take from each shared bucket asks for: doubled when takes come within
        HOLD_SECONDS of one another, halved when tokens lapse unspent."""
        self._last_take: dict[str, float] = {}
        """When this process last took from each shared bucket (monotonic)."""

    async def rates(self, namespace: str) -> quotas.NamespaceRates:
        now = time.monotonic()
        hit = self._rates.get(namespace)
        if hit is not None and now - hit[0] < RATES_TTL_SECONDS:
            return hit[1]
        # An unknown namespace gets the defaults: its calls fail NotFound anyway, but count first.
        rates = quotas.namespace_rates(await dbthreads.run(_overrides, namespace))
        if len(self._rates) > 10_000:
            self._rates.clear()
        self._rates[namespace] = (now, rates)
        return rates

    @property
    def any_empty(self) -> bool:
        """Whether this process knows of any empty bucket (else `known_empty` answers None for all)."""
        return bool(self._empty_until)

    def known_empty(self, draw: Draw) -> ResourceExhausted | None:
        """The refusal, if this process already knows the bucket is empty; no I/O, no token taken."""
        key = draw.key
        known = self._empty_until.get(key)
        if known is None:
            return None
        until, rps = known
        now = time.monotonic()
        if key in self._probing:
            # Another call of this process is asking for the token that just came due; a drained bucket
            # gains one per interval, so the answer for the rest is no (and they would all ask at once).
            wait = 1 / rps if rps > 0 else 0.001
        else:
            wait = until - now
            if wait <= 0:
                return None
        self._refused_at[key] = now
        _count_refusal(draw)
        return exhausted(draw, rps, Decision(False, wait))

    def _spend_held(self, key: str) -> bool:
        """Spend a token this process took ahead for `key`, if it holds one still fresh."""
        held = self._held.get(key)
        if held is None:
            return False
        count, until = held
        if time.monotonic() >= until:
            # Tokens lapsed unspent: calls come slower than the batch assumed, so take fewer next time.
            del self._held[key]
            self._ahead[key] = max(1, self._ahead.get(key, 1) // 2)
            return False
        if count > 1:
            self._held[key] = (count - 1, until)
        else:
            del self._held[key]
        return True

    def _wanted(self, key: str, rps: float) -> int:
        """How many tokens to take from the shared bucket `key` now: twice the last take's if that was less
        than HOLD_SECONDS ago (calls come that fast), up to `_ahead_most`."""
        now = time.monotonic()
        last = self._last_take.get(key)
        if len(self._last_take) > 10_000:
            self._last_take.clear()
            self._ahead.clear()
        self._last_take[key] = now
        if last is not None and now - last < HOLD_SECONDS:
            self._ahead[key] = min(self._ahead.get(key, 1) * 2, _ahead_most(rps))
        return self._ahead.get(key, 1)

    def _hold(self, key: str, count: int) -> None:
        now = time.monotonic()
        held = self._held.get(key)
        if held is not None and now < held[1]:
            count += held[0]  # another call's take, made while this one's was under way
        elif len(self._held) > 10_000:
            self._held.clear()
        self._held[key] = (count, now + HOLD_SECONDS)

    async def check(
        self, namespace: str, bucket: quotas.Bucket, principal: Principal = ANONYMOUS
    ) -> ResourceExhausted | None:
        """The error to answer when the caller's key's or `namespace`'s `bucket` is empty (a token is taken
        from each otherwise; a key refused takes none of the namespace's)."""
        rates = await self.rates(namespace)
        for draw in draws(namespace, bucket, principal):
            if draw.limit is Limit.KEY:
                rps = quotas.key_rps(rates, dict(principal.rate_limits), bucket)
            else:
                rps = rates.rps[bucket]
            refusal = await self._take(draw, rps)
            if refusal is not None:
                return refusal
        return None

    async def _take(self, draw: Draw, rps: float) -> ResourceExhausted | None:
        refusal = self.known_empty(draw)
        if refusal is not None:
            return refusal
        key = draw.key
        probe = key in self._empty_until  # it was empty: this call alone asks whether it refilled
        if probe:
            self._probing.add(key)
        if not probe and self._spend_held(key):
            return None
        try:
            wanted = self._wanted(key, rps) if self.limiter.remote and not probe else 1
            taken, retry_after = await self.limiter.acquire_many(key, quotas.rate_of(rps), wanted)
        finally:
            if probe:
                self._probing.discard(key)
        decision = Decision(taken > 0, retry_after)
        if taken > 1:
            self._hold(key, taken - 1)
        if decision.allowed:
            # While calls are still being refused, the next token goes to one asker at a time too; a
            # second without a refusal means the flood is over and calls ask the limiter freely again.
            if probe and time.monotonic() - self._refused_at.get(key, 0.0) > FLOOD_OVER_SECONDS:
                self._empty_until.pop(key, None)
                self._refused_at.pop(key, None)
            return None
        if len(self._empty_until) > 10_000:
            self._empty_until.clear()
            self._refused_at.clear()
        self._empty_until[key] = (time.monotonic() + decision.retry_after, rps)
        _count_refusal(draw)
        return exhausted(draw, rps, decision)


class RateLimitInterceptor(grpc.aio.ServerInterceptor):
    """Takes a token from the namespace's bucket of every limited method before its handler runs.

    Registered after the AuthInterceptor, so only authenticated, authorised calls spend tokens.
    """

    def __init__(self, limits: NamespaceLimits) -> None:
        self.limits = limits
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}
        """Each limited method's handler, wrapped once (it depends on nothing of the call)."""

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        full = handler_call_details.method
        rule = methods.rule_for(full)
        if rule is None or rule.bucket is quotas.Bucket.NONE:
            return handler
        wrapped = self._wrapped.get(full)
        if wrapped is None or wrapped[0] is not handler:
            wrapped = self._wrapped[full] = (handler, self._wrap(handler, rule.bucket))
        return wrapped[1]

    def _wrap(self, handler: Handler, bucket: quotas.Bucket) -> Handler:
        behavior = unary_behavior(handler)
        limits = self.limits

        async def limited(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            namespace = getattr(request, "namespace", "")
            if namespace:
                # The AuthInterceptor, outside this one, has bound the caller.
                refusal = await limits.check(namespace, bucket, current())
                if refusal is not None:
                    refuse(context, refusal)
                    return None
            return await behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            limited,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _refusal_handler(refusal: ResourceExhausted) -> Handler:
    async def refused(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        refuse(context, refusal)

    # No deserializer: the request's bytes are never decoded.
    return grpc.unary_unary_rpc_method_handler(refused)


class ShedInterceptor(grpc.aio.ServerInterceptor):
    """Refuses a limited call from its namespace header alone while the process knows the bucket empty.

    Registered first, before authentication: a refusal here is the answer the full path would give
    any caller (the bucket's next token time only moves forward), so skipping the key check lets no
    one do anything; a header that names another namespace than the request only gets its own sender
    refused. See the module's docstring.
    """

    def __init__(self, limits: NamespaceLimits) -> None:
        self.limits = limits

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        rule = methods.rule_for(handler_call_details.method)
        # Nothing known empty (no flood going on): no header is worth reading.
        if rule is not None and rule.bucket is not quotas.Bucket.NONE and self.limits.any_empty:
            namespace = prefix = ""
            for key, value in handler_call_details.invocation_metadata or ():
                # A key without the -bin suffix has a text value.
                if key == NAMESPACE_HEADER:
                    namespace = cast(str, value)
                elif key == "authorization":
                    parsed = api_keys.parse(cast(str, value))
                    prefix = parsed.prefix if parsed is not None else ""
            if namespace:
                # As the full path: the key's bucket first (by the prefix the header names, unverified: a
                # forged key with a flooding key's prefix only gets its own sender refused), then the
                # namespace's.
                caller = Principal(anonymous=False, prefix=prefix) if prefix else ANONYMOUS
                for draw in draws(namespace, rule.bucket, caller):
                    refusal = self.limits.known_empty(draw)
                    if refusal is not None:
                        return _refusal_handler(refusal)
        return await continuation(handler_call_details)
