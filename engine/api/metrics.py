"""Per-method request, error and latency series of the gRPC API (an aio interceptor, the outermost).

It wraps the handler the rest of the chain chose, so refusals of every inner interceptor (bounds, shed
load, auth, rate limits) are counted with their codes. The wrapper keeps the inner handler's request
deserializer: EdgeInterceptor's decoder stays the one grpcio calls. Each method's wrapper, and each
(method, namespace)'s series, is looked up once and then found in a dict: a call costs two clock reads,
a counter increment and a histogram observation.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from perdura import metrics

from engine.api.aio_types import Continuation, Handler, unary_behavior

_CODE_NAMES = {c.value[0]: c.name for c in grpc.StatusCode}


def _code(context: grpc.aio.ServicerContext[Any, Any], default: str) -> str:
    """The name of the status the call ends with: the code set or aborted with, else `default`."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int):
        return _CODE_NAMES.get(code, default)
    return default


class _Series:
    """One method's children of the request series, per namespace label."""

    __slots__ = ("_by_namespace", "method")

    def __init__(self, method: str) -> None:
        self.method = method
        self._by_namespace: dict[str, tuple[Any, Any]] = {}

    def of(self, namespace: str) -> tuple[Any, Any]:
        found = self._by_namespace.get(namespace)
        if found is None:
            label = metrics.namespace_label(namespace)
            found = (
                metrics.grpc_requests.labels(self.method, label),
                metrics.grpc_duration.labels(self.method, label),
            )
            # Raw namespace strings past the label bound all share the OTHER children; the dict stays
            # bounded the same way.
            if label != metrics.OTHER:
                self._by_namespace[namespace] = found
        return found

    def error(self, namespace: str, code: str) -> None:
        metrics.grpc_errors.labels(self.method, metrics.namespace_label(namespace), code).inc()


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts and times every unary call, by method, namespace and (for failures) gRPC code."""

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        full = handler_call_details.method
        cached = self._wrapped.get(full)
        if cached is None or cached[0] is not handler:
            cached = self._wrapped[full] = (handler, _measured(handler, _Series(full.rpartition("/")[2])))
        return cached[1]


def _measured(handler: Handler, series: _Series) -> Handler:
    behavior = unary_behavior(handler)

    async def measured(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        started = time.perf_counter()
        # A refused request (EdgeInterceptor's Refused, a shed call's raw bytes) names no namespace.
        namespace = getattr(request, "namespace", "")
        if not isinstance(namespace, str):
            namespace = ""
        requests, duration = series.of(namespace)
        requests.inc()
        code = "OK"
        try:
            response = await behavior(request, context)
            code = _code(context, "OK")
            return response
        except asyncio.CancelledError:
            code = "CANCELLED"
            raise
        except BaseException:
            code = _code(context, "UNKNOWN")
            raise
        finally:
            duration.observe(time.perf_counter() - started)
            if code != "OK":
                series.error(namespace, code)

    return grpc.unary_unary_rpc_method_handler(
        measured,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
