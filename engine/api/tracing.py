"""A server span per gRPC call, continuing the caller's trace (an aio interceptor, installed when traces are on).

The caller's span context comes from the call's metadata (`traceparent`, W3C trace context, as gRPC's
OpenTelemetry instrumentation sends it) or, failing that, from the Temporal header of the request: the
SDKs' tracing interceptors (temporalio.contrib.opentelemetry in Python) put a W3C carrier under
`_tracer-data` in the `header` of starts, signals, signal-with-starts, queries and updates, as a JSON
payload, not in the gRPC metadata. So a trace goes SDK span → this server span → what the handler does.

Spans carry the method, the namespace and the gRPC status code; never payloads. Like MetricsInterceptor
it keeps the inner handler's deserializer, and each method's wrapper is built once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import SpanKind, Status, StatusCode

from engine.api.aio_types import Continuation, Handler, unary_behavior

TRACER_DATA = "_tracer-data"
"""The Temporal header field the SDKs' OpenTelemetry interceptors carry the span context in."""
_CODES = {c.value[0]: c for c in grpc.StatusCode}


class _MetadataGetter(Getter[Iterable[tuple[str, Any]]]):
    """Reads propagation fields from gRPC invocation metadata (text values only)."""

    def get(self, carrier: Iterable[tuple[str, Any]], key: str) -> list[str] | None:
        values = [v for k, v in carrier if k == key and isinstance(v, str)]
        return values or None

    def keys(self, carrier: Iterable[tuple[str, Any]]) -> list[str]:
        return [k for k, _ in carrier]


_METADATA = _MetadataGetter()


def _temporal_header(request: Any) -> Any:
    """The Temporal `Header` of a request that carries one (at the top, or in its query or update input)."""
    for path in (("header",), ("query", "header"), ("request", "input", "header")):
        message = request
        for field in path:
            try:
                if not message.HasField(field):
                    message = None
                    break
            except (AttributeError, ValueError):
                message = None
                break
            message = getattr(message, field)
        if message is not None:
            return message
    return None


def _carrier_of_header(request: Any) -> Mapping[str, str] | None:
    header = _temporal_header(request)
    if header is None or TRACER_DATA not in header.fields:
        return None
    payload = header.fields[TRACER_DATA]
    if payload.metadata.get("encoding") != b"json/plain":
        return None
    try:
        carrier = json.loads(payload.data)
    except ValueError:
        return None
    if not isinstance(carrier, dict):
        return None
    return {k: v for k, v in carrier.items() if isinstance(k, str) and isinstance(v, str)}


def parent_context(metadata: Iterable[tuple[str, Any]] | None, request: Any) -> otel_context.Context | None:
    """The caller's span context: from the metadata's W3C fields, else from the request's Temporal header."""
    metadata = list(metadata or ())
    if any(key == "traceparent" for key, _ in metadata):
        return propagate.extract(metadata, getter=_METADATA)
    carrier = _carrier_of_header(request)
    if carrier:
        return propagate.extract(carrier)
    return None


def _code(context: grpc.aio.ServicerContext[Any, Any], default: grpc.StatusCode) -> grpc.StatusCode:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):
        return _CODES.get(code, default)
    return default


class TracingInterceptor(grpc.aio.ServerInterceptor):
    """Opens a SERVER span around every unary call (perdura/tracing.py turns it on)."""

    def __init__(self, tracer: trace.Tracer | None = None) -> None:
        self.tracer = tracer or trace.get_tracer("perdura.api")
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
            cached = self._wrapped[full] = (handler, self._traced(handler, full))
        return cached[1]

    def _traced(self, handler: Handler, full: str) -> Handler:
        behavior = unary_behavior(handler)
        service, _, method = full.strip("/").rpartition("/")
        name = f"{service}/{method}"
        tracer = self.tracer

        async def traced(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            parent = parent_context(context.invocation_metadata(), request)
            attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
            namespace = getattr(request, "namespace", "")
            if isinstance(namespace, str) and namespace:
                attributes["perdura.namespace"] = namespace
            with tracer.start_as_current_span(
                name,
                context=parent,
                kind=SpanKind.SERVER,
                attributes=attributes,
                record_exception=False,  # an exception's text may quote the request
                set_status_on_exception=False,
            ) as span:
                code = grpc.StatusCode.OK
                try:
                    response = await behavior(request, context)
                    code = _code(context, grpc.StatusCode.OK)
                    return response
                except asyncio.CancelledError:
                    code = grpc.StatusCode.CANCELLED
                    raise
                except BaseException:
                    code = _code(context, grpc.StatusCode.UNKNOWN)
                    raise
                finally:
                    span.set_attribute("rpc.grpc.status_code", code.value[0])
                    if code is not grpc.StatusCode.OK:
                        # The code's name only: status messages may quote what the client sent.
                        span.set_status(Status(StatusCode.ERROR, code.name))

        return grpc.unary_unary_rpc_method_handler(
            traced,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
