"""Task tokens: opaque to workers, naming (namespace, run, scheduled event, attempt) of one task (rule 5)."""

from __future__ import annotations

import msgspec

from engine.errors import InvalidArgument

_PREFIX = b"P1"


class TaskToken(msgspec.Struct, array_like=True):
    namespace_id: str
    workflow_id: str
    run_id: str
    scheduled_event_id: int
    attempt: int
    started_event_id: int = 0
    """For workflow tasks: the started event id the worker was given."""
    activity_id: str = ""
    query_id: int = 0
    """For query tasks: the query the answer belongs to."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(TaskToken)


def encode(token: TaskToken) -> bytes:
    return _PREFIX + _encoder.encode(token)


def decode(data: bytes) -> TaskToken:
    """Raises InvalidArgument for anything that is not a token this server issued."""
    if not data.startswith(_PREFIX):
        raise InvalidArgument("Error deserializing task token.")
    try:
        return _decoder.decode(data[len(_PREFIX) :])
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise InvalidArgument("Error deserializing task token.") from None
