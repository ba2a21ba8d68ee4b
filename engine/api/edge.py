"""The outermost interceptor: every request is decoded, and bounded (engine/bounds.py), before anything else.

grpcio decodes a request between the interceptors and the handler, and a decoding error there (a string
field with invalid UTF-8, messages nested past protobuf's recursion limit) never reaches our handlers: grpcio
answers UNKNOWN with Python's exception text. Here each method's deserializer is wrapped so that such a
request, or one that engine/bounds.py refuses, becomes a `Refused` value, and the method's behaviour answers
it with INVALID_ARGUMENT before the auth check or the handler run: those never see a request they cannot read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message
from perdura import logcontext

from engine import bounds
from engine.api.aio_types import Continuation, Handler, unary_behavior
from engine.api.errors import abort
from engine.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class Refused:
    """What the deserializer hands on instead of a request it will not let through."""

    message: str


def decoder(deserialize: Callable[[bytes], Message]) -> Callable[[bytes], Message | Refused]:
    """`deserialize` with the bounds applied, returning Refused for what it cannot or may not decode."""

    def decode(data: bytes) -> Message | Refused:
        try:
            request = deserialize(data)
        except DecodeError as e:
            kind = getattr(deserialize, "__self__", None)
            name = getattr(getattr(kind, "DESCRIPTOR", None), "name", "request")
            return Refused(
                f"The request could not be decoded as a {name} ({e}): every string field must be valid "
                f"UTF-8, and messages may nest at most {bounds.MAX_DEPTH} deep."
            )
        try:
            bounds.check_request(request)
        except InvalidArgument as e:
            return Refused(e.message)
        return request

    return decode


def guard(handler: Handler, method: str) -> Handler:
    """The same unary method, answering INVALID_ARGUMENT for a Refused request."""
    behavior = unary_behavior(handler)
    deserialize = handler.request_deserializer
    assert deserialize is not None  # EdgeInterceptor guards only handlers that decode their request

    async def guarded(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        with logcontext.call(method, request, context):  # the call's fields on its log lines
            if isinstance(request, Refused):
                await abort(context, InvalidArgument(request.message))
            return await behavior(request, context)

    return grpc.unary_unary_rpc_method_handler(
        guarded,
        request_deserializer=decoder(deserialize),
        response_serializer=handler.response_serializer,
    )


class EdgeInterceptor(grpc.aio.ServerInterceptor):
    """Put before every other interceptor but MetricsInterceptor (which keeps the deserializer of the handler
    it wraps), so that its decoder is the one grpcio calls."""

    def __init__(self) -> None:
        self._guarded: dict[str, tuple[Handler, Handler]] = {}
        """Each method's guarded handler, built once for the inner handler it wraps (which the inner
        interceptors also build once per method), not once per call."""

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None or handler.request_deserializer is None:
            return handler  # not a unary method, or a refusal that never decodes the request
        method = handler_call_details.method
        cached = self._guarded.get(method)
        if cached is None or cached[0] is not handler:
            cached = self._guarded[method] = (handler, guard(handler, method))
        return cached[1]
