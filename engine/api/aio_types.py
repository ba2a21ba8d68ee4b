"""grpc.aio's server-side types as the interceptors use them (the stubs type method handlers sync).

types-grpcio types `RpcMethodHandler.unary_unary` as grpc's sync behaviour, `(request, ServicerContext)
-> response`; on a grpc.aio server it is the coroutine function the servicer defined (or an inner
interceptor wrapped), `(request, aio.ServicerContext) -> Awaitable[response]`. Requests and responses
are Any: one interceptor serves every method. The aliases are strings: grpc's runtime classes are
not generic, only their stubs are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, cast

import grpc

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
"""A method's handler, as a continuation answers it and an interceptor returns it."""

Continuation: TypeAlias = "Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]"
"""What a grpc.aio.ServerInterceptor calls for the handler the rest of the chain chose."""

Behavior: TypeAlias = "Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]"
"""A unary method's coroutine function on a grpc.aio server."""


def unary_behavior(handler: Handler) -> Behavior:
    """The coroutine function of a unary `handler` (one the caller has checked has a unary_unary)."""
    return cast(Behavior, handler.unary_unary)
