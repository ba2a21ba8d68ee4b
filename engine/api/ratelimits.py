"""Per-namespace rate limits on the gRPC API (an aio interceptor after the auth interceptor).

A call whose row in the method table (engine/api/methods.py) names a bucket takes one token from
that bucket of the request's namespace before its handler runs; an empty bucket answers
RESOURCE_EXHAUSTED with the ResourceExhaustedFailure Temporal's frontend sends (cause RPS_LIMIT,
scope NAMESPACE), which the SDKs retry with backoff. A poll takes its token when the request
arrives: a poller that then waits for a task holds nothing, as Temporal limits poll requests per
second. The rates come from tenants/quotas.py (defaults and the namespace's overrides), read from
the database at most every few seconds per namespace and process.

A flood is refused twice as cheaply as it is checked: once a bucket is found empty, the process knows
until when, and `ShedInterceptor` (the first interceptor) refuses the namespace's calls of that bucket
from their `temporal-namespace` header alone (the SDKs send it with every call, as Temporal's frontend
reads it): no decoding, no key lookup, no audit context. It refuses only what the full path would,
and spends no token, so it gives no one a way to starve a namespace. Calls without the header take
the full path, whose refusal is also answered without raising.
"""

from __future__ import annotations

import logging
import time

import grpc
from perdura.ratelimit import Decision, Limiter
from temporalio.api.enums.v1 import ResourceExhaustedCause, ResourceExhaustedScope
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure

from engine import dbthreads
from engine.api import methods
from engine.api.errors import refuse
from engine.errors import ResourceExhausted
from tenants import quotas
from tenants.models import Namespace

log = logging.getLogger("perdura.ratelimit")
FLOOD_OVER_SECONDS = 1.0
"""A bucket that refused no call for this long is asked freely again, not one call at a time."""
NAMESPACE_HEADER = "temporal-namespace"
"""The metadata key that names a call's namespace (sent by the SDKs and the CLI with every call)."""
RATES_TTL_SECONDS = 5.0
"""How long a process uses a namespace's rates before reading them again (overrides apply this fast)."""


def _overrides(name: str) -> dict[str, float] | None:
    row = Namespace.objects.filter(name=name).values_list("rate_limits", flat=True).first()
    return row or None


def exhausted(namespace: str, bucket: quotas.Bucket, rps: float, decision: Decision) -> ResourceExhausted:
    """The error of a refused call, worded and detailed as Temporal's namespace RPS limit."""
    return ResourceExhausted(
        f"namespace rate limit exceeded: namespace {namespace!r} allows {rps:g} {bucket.value} requests "
        f"per second; retry in {max(decision.retry_after, 0.001):.3f}s",
        ResourceExhaustedFailure(
            cause=ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT,
            scope=ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
        ),
    )


class NamespaceLimits:
    """Checks a namespace's bucket: the rates (cached per process) and the shared limiter."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter
        self._rates: dict[str, tuple[float, quotas.NamespaceRates]] = {}
        self._empty_until: dict[str, float] = {}
        """Buckets known to be empty, until when (monotonic). A bucket's next token time only moves
        forward, so refusing locally until then gives the answer the limiter would, without asking it:
        a flood costs one shared-bucket check per token, not one per call."""
        self._probing: set[str] = set()
        """Buckets known empty whose next token one call is asking the limiter for right now."""
        self._refused_at: dict[str, float] = {}
        """When each of those buckets last refused a call locally: a flood still going on."""

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

    def known_empty(self, namespace: str, bucket: quotas.Bucket) -> ResourceExhausted | None:
        """The refusal, if this process already knows the bucket is empty; no I/O, no token taken."""
        key = quotas.bucket_key(namespace, bucket)
        until = self._empty_until.get(key)
        if until is None:
            return None
        cached = self._rates.get(namespace)
        rps = cached[1].rps[bucket] if cached is not None else 0.0
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
        return exhausted(namespace, bucket, rps, Decision(False, wait))

    async def check(self, namespace: str, bucket: quotas.Bucket) -> ResourceExhausted | None:
        """The error to answer when `namespace`'s `bucket` is empty (a token is taken otherwise)."""
        rates = await self.rates(namespace)
        refusal = self.known_empty(namespace, bucket)
        if refusal is not None:
            return refusal
        key = quotas.bucket_key(namespace, bucket)
        probe = key in self._empty_until  # it was empty: this call alone asks whether it refilled
        if probe:
            self._probing.add(key)
        try:
            decision = await self.limiter.acquire(key, rates.rate(bucket))
        finally:
            if probe:
                self._probing.discard(key)
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
        self._empty_until[key] = time.monotonic() + decision.retry_after
        return exhausted(namespace, bucket, rates.rps[bucket], decision)


class RateLimitInterceptor(grpc.aio.ServerInterceptor):
    """Takes a token from the namespace's bucket of every limited method before its handler runs.

    Registered after the AuthInterceptor, so only authenticated, authorised calls spend tokens.
    """

    def __init__(self, limits: NamespaceLimits) -> None:
        self.limits = limits
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}
        """Each limited method's handler, wrapped once (it depends on nothing of the call)."""

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
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

    def _wrap(self, handler: grpc.RpcMethodHandler, bucket: quotas.Bucket) -> grpc.RpcMethodHandler:
        behavior = handler.unary_unary
        limits = self.limits

        async def limited(request, context):  # type: ignore[no-untyped-def]
            namespace = getattr(request, "namespace", "")
            if namespace:
                refusal = await limits.check(namespace, bucket)
                if refusal is not None:
                    refuse(context, refusal)
                    return None
            return await behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            limited,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _refusal_handler(refusal: ResourceExhausted) -> grpc.RpcMethodHandler:
    async def refused(_request, context):  # type: ignore[no-untyped-def]
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

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        rule = methods.rule_for(handler_call_details.method)
        if rule is not None and rule.bucket is not quotas.Bucket.NONE:
            for key, value in handler_call_details.invocation_metadata or ():
                if key == NAMESPACE_HEADER:
                    refusal = self.limits.known_empty(value, rule.bucket)
                    if refusal is not None:
                        return _refusal_handler(refusal)
                    break
        return await continuation(handler_call_details)
