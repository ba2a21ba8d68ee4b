"""Mapping of engine errors to gRPC statuses (with Temporal's error details), and the handler wrapper."""

from __future__ import annotations

import contextvars
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from django.db import InterfaceError, OperationalError
from google.protobuf import any_pb2
from google.rpc import status_pb2

from engine.errors import EngineError

log = logging.getLogger("perdura.api")
T = TypeVar("T")

before_failure: contextvars.ContextVar[Callable[[grpc.StatusCode], Awaitable[None]] | None] = (
    contextvars.ContextVar("before_failure", default=None)
)
"""What must happen before a failing call's status leaves (`aborting`): the auth interceptor writes the
call's audit entry there (engine/api/auth.py). `context.abort` sends the status at once, and a caller
that acted on it could otherwise have its next call's entry written first."""


async def aborting(
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    message: str,
    trailing_metadata: tuple[tuple[str, bytes], ...] = (),
) -> None:
    """`context.abort`, after the call's `before_failure` hook."""
    hook = before_failure.get()
    if hook is not None:
        await hook(code)
    await context.abort(code, message, trailing_metadata=trailing_metadata)


MAX_MESSAGE_BYTES = 2048
"""A status message travels twice in the trailers (grpc-message, percent-encoded, and inside
grpc-status-details-bin, base64), and clients drop trailers past 8 KiB with an unrelated error
(RESOURCE_EXHAUSTED, "received metadata size exceeds soft limit"). Messages that quote what a client sent
are cut to this many bytes *as percent-encoded*: a byte that grpc-message escapes (`%`, control bytes,
every byte of a non-ASCII character) counts three. That keeps both copies together under 5 KiB."""

_TRUNCATED = "… (truncated)"


def _encoded_size(character: str) -> int:
    code = ord(character)
    return 1 if 0x20 <= code <= 0x7E and character != "%" else 3 * len(character.encode())


def bounded(message: str) -> str:
    """`message`, cut on a character boundary to MAX_MESSAGE_BYTES as grpc-message encodes it, and marked
    when cut."""
    if len(message) <= MAX_MESSAGE_BYTES // 12 or (  # a character costs 12 at most (4 bytes, escaped)
        len(message) <= MAX_MESSAGE_BYTES
        and message.isascii()
        and message.isprintable()
        and "%" not in message
    ):
        return message
    size = 0
    for at, character in enumerate(message):
        size += _encoded_size(character)
        if size > MAX_MESSAGE_BYTES:
            return message[:at] + _TRUNCATED
    return message


def _status(error: EngineError) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    code = getattr(grpc.StatusCode, error.code)
    message = bounded(error.message)
    status = status_pb2.Status(code=code.value[0], message=message)
    if error.details is not None:
        detail = any_pb2.Any()
        detail.Pack(error.details)
        status.details.append(detail)
    return code, message, (("grpc-status-details-bin", status.SerializeToString()),)


async def abort(context: grpc.aio.ServicerContext, error: EngineError) -> None:
    code, message, trailers = _status(error)
    await aborting(context, code, message, trailers)


def refuse(context: grpc.aio.ServicerContext, error: EngineError) -> None:
    """Answer `error` when the handler returns, without raising: for refusals on the hot path of a flood,
    where unwinding an AbortError through every wrapper costs more than the refusal itself."""
    code, message, trailers = _status(error)
    context.set_code(code)
    context.set_details(message)
    context.set_trailing_metadata(trailers)


def rpc(handler: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Turn engine errors into their status, a lost database into UNAVAILABLE, anything unexpected into
    INTERNAL with an id, never a traceback."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            return await handler(self, request, context)
        except EngineError as e:
            await abort(context, e)
        except grpc.aio.AbortError:
            raise
        except (OperationalError, InterfaceError) as e:
            # The database went away or refused mid-call (a restart, a failover, a deadlock): a
            # condition to retry, as Temporal answers a persistence outage, not a bug to file as an
            # incident. Clients retry UNAVAILABLE with the same request id, which dedupes a call whose
            # commit landed before the connection broke.
            log.warning(
                "database unavailable in %s: %s", handler.__name__, str(e).splitlines()[0] if str(e) else e
            )
            await aborting(context, grpc.StatusCode.UNAVAILABLE, "the database is unavailable; retry shortly")
        except Exception:
            incident = uuid.uuid4().hex[:12]
            log.exception("internal error in %s (incident %s)", handler.__name__, incident)
            await aborting(
                context,
                grpc.StatusCode.INTERNAL,
                f"internal error (incident {incident}); the server log has details",
            )
        raise AssertionError("unreachable")

    return wrapper


def handler(fn: Callable[[Any, grpc.aio.ServicerContext], Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A servicer method that answers with `fn(request, context)`, its errors mapped as `rpc` maps them."""

    async def method(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        return await fn(request, context)

    method.__name__ = fn.__name__
    method.__qualname__ = fn.__qualname__
    return rpc(method)
