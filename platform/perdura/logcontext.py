"""What a log line knows about the gRPC call it was written in: namespace, method, request id, trace id.

The edge interceptor (engine/api/edge.py) opens a `call` around each handler run. The values live in a
context variable, so they follow the call into its database threads (engine/api/dbthreads.py runs work in a
copy of the caller's context) and vanish when it returns; the JSON formatter (perdura/logs.py) reads them.
Only identifiers go here, never a request's payloads.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

log = logging.getLogger("perdura.api.calls")


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    """The short method name, e.g. `StartWorkflowExecution`."""
    namespace: str
    request_id: str
    """The SDK's request id where the request carries one (starts, signals...), else one made per call."""
    trace_id: str = ""
    """The call's trace (32 hex digits) when traces are on (perdura/tracing.py), else empty."""


_current: ContextVar[Call | None] = ContextVar("perdura_log_call", default=None)

CLIENT_ERRORS_QUIET = frozenset({"RESOURCE_EXHAUSTED", "CANCELLED"})
"""Refusals that come in floods (rate limits) or with every client that goes away: DEBUG, not INFO."""
SERVER_ERRORS = frozenset({"INTERNAL", "UNKNOWN", "UNAVAILABLE", "DATA_LOSS", "UNIMPLEMENTED"})


def current() -> Call | None:
    return _current.get()


def call_of(method: str, request: Any) -> Call:
    """The log context of one call of `method` (the full gRPC path) carrying `request`."""
    namespace = getattr(request, "namespace", "")
    request_id = getattr(request, "request_id", "")
    span = trace.get_current_span().get_span_context()
    return Call(
        method=method.rpartition("/")[2],
        namespace=namespace if isinstance(namespace, str) else "",
        request_id=request_id if isinstance(request_id, str) and request_id else uuid.uuid4().hex,
        trace_id=trace.format_trace_id(span.trace_id) if span.is_valid else "",
    )


def failure_level(code: str) -> int:
    """How loudly a call that ended with `code` is logged: the server's faults as warnings, a client's
    mistakes as information, floods and hang-ups only when debugging."""
    if code in SERVER_ERRORS:
        return logging.WARNING
    if code in CLIENT_ERRORS_QUIET:
        return logging.DEBUG
    return logging.INFO


@contextlib.contextmanager
def call(method: str, request: Any, context: Any) -> Iterator[Call]:
    """Run the body as `method`'s call: its log lines carry the call's fields, and a call that ends with a
    status other than OK writes one line with that status's code (never the message, which may quote
    what the client sent)."""
    entry = call_of(method, request)
    token = _current.set(entry)
    try:
        yield entry
    finally:
        code = _code_name(context)
        if code and code != "OK":
            log.log(failure_level(code), "%s answered %s", entry.method, code, extra={"code": code})
        _current.reset(token)


def _code_name(context: Any) -> str:
    try:
        code = context.code()
    except Exception:  # a context that cannot tell (not a grpc.aio one)
        return ""
    if code is None:
        return ""
    return getattr(code, "name", str(code))
