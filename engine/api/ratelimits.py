"""Per-namespace rate limits on the gRPC API (an aio interceptor after the auth interceptor).

A call whose row in the method table (engine/api/methods.py) names a bucket takes one token from
that bucket of the request's namespace before its handler runs; an empty bucket answers
RESOURCE_EXHAUSTED with the ResourceExhaustedFailure Temporal's frontend sends (cause RPS_LIMIT,
scope NAMESPACE), which the SDKs retry with backoff. A poll takes its token when the request
arrives: a poller that then waits for a task holds nothing, as Temporal limits poll requests per
second. The rates come from tenants/quotas.py (defaults and the namespace's overrides), read from
the database at most every few seconds per namespace and process.
"""

from __future__ import annotations

import logging
import time

import grpc
from perdura.ratelimit import Decision, Limiter
from temporalio.api.enums.v1 import ResourceExhaustedCause, ResourceExhaustedScope
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure

from engine.api import dbthreads, methods
from engine.api.errors import abort
from engine.errors import ResourceExhausted
from tenants import quotas
from tenants.models import Namespace

log = logging.getLogger("perdura.ratelimit")
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

    async def check(self, namespace: str, bucket: quotas.Bucket) -> ResourceExhausted | None:
        """The error to answer when `namespace`'s `bucket` is empty (a token is taken otherwise)."""
        rates = await self.rates(namespace)
        key = f"ns:{namespace}:{bucket.value}"
        until = self._empty_until.get(key)
        if until is not None:
            wait = until - time.monotonic()
            if wait > 0:
                return exhausted(namespace, bucket, rates.rps[bucket], Decision(False, wait))
            del self._empty_until[key]
        decision = await self.limiter.acquire(key, rates.rate(bucket))
        if decision.allowed:
            return None
        if len(self._empty_until) > 10_000:
            self._empty_until.clear()
        self._empty_until[key] = time.monotonic() + decision.retry_after
        return exhausted(namespace, bucket, rates.rps[bucket], decision)


class RateLimitInterceptor(grpc.aio.ServerInterceptor):
    """Takes a token from the namespace's bucket of every limited method before its handler runs.

    Registered after the AuthInterceptor, so only authenticated, authorised calls spend tokens.
    """

    def __init__(self, limits: NamespaceLimits) -> None:
        self.limits = limits

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        full = handler_call_details.method
        rule = methods.rule_for(full)
        if rule is None or rule.bucket is quotas.Bucket.NONE:
            return handler
        bucket = rule.bucket
        method = full.rpartition("/")[2]
        behavior = handler.unary_unary
        limits = self.limits

        async def limited(request, context):  # type: ignore[no-untyped-def]
            namespace = getattr(request, "namespace", "")
            if namespace:
                refusal = await limits.check(namespace, bucket)
                if refusal is not None:
                    log.debug("throttled %s on %s", method, namespace)
                    await abort(context, refusal)
            return await behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            limited,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
