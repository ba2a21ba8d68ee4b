"""Bounds every request obeys before any handler sees it: durations, timestamps, numbers, depth, sizes.

The history rules compute deadlines as `now + duration`, retry delays as `initial * coefficient ** n`, and
store messages that clients parse again later. A value they cannot compute with (a timeout of 1e12 s, a NaN
coefficient, a failure whose causes nest 99 deep) must never get that far: once written, it raises in a shard
queue on every attempt. So one walk over each decoded request, whatever its method, either answers
INVALID_ARGUMENT with a message naming the field, or caps the value as Temporal does:

- a Duration longer than 100 years is capped to 100 years (Temporal's ValidateAndCapProtoDuration), so
  `now + duration` stays inside the calendar however the rules add them up; negative ones are capped to
  minus 100 years and left for each field's own check to refuse with its own message;
- `nanos` outside ±999,999,999 are folded into `seconds`, as Temporal's Go runtime reads them;
- a Timestamp outside 0001-01-01 .. 9999-12-31 (protobuf's own range) is refused;
- a NaN or infinite float is refused (outside workflow commands, whose rules fail the task instead);
- messages nested deeper than MAX_DEPTH are refused, so that every stored message still parses (protobuf's
  parsers stop at 100 levels, and history wraps a request's failure in three more);
- a `namespace` or an `identity` longer than MAX_ID_LENGTH, and a Header larger than the blob limit, are
  refused;
- a NUL character in any string outside a failure is refused: Postgres text cannot hold it, so an id or a
  name with one answered INTERNAL in production (and was accepted in `perdura dev`).

Pure: no I/O; the walk mutates only the capped Duration fields of the request it is given.
"""

from __future__ import annotations

import math
from typing import cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from engine.errors import InvalidArgument

MAX_ID_LENGTH = 1000
"""Temporal's limit.maxIDLength: ids, names, identities and request ids."""
BLOB_SIZE_LIMIT = 2 * 1024 * 1024
"""Temporal's default per-payload limit (limit.blobSize.error); headers are held to it too."""
MAX_DURATION_SECONDS = 100 * 365 * 24 * 3600
"""Temporal caps durations at 100 years (common/primitives/timestamp: maxAllowedDuration)."""
MAX_DEPTH = 64
"""Levels of nested messages a request may have (a failure and 60-odd causes)."""
MIN_TIMESTAMP_SECONDS = -62135596800  # 0001-01-01T00:00:00Z
MAX_TIMESTAMP_SECONDS = 253402300799  # 9999-12-31T23:59:59Z

_NANOS = 1_000_000_000
_DURATION = "google.protobuf.Duration"
_TIMESTAMP = "google.protobuf.Timestamp"
_HEADER = "temporal.api.common.v1.Header"
_USER_DATA = frozenset(
    {
        "temporal.api.common.v1.Payload",
        "temporal.api.common.v1.Payloads",
        "temporal.api.common.v1.Memo",
        "temporal.api.common.v1.SearchAttributes",
    }
)
"""Opaque user data: sized by the handlers against the blob limit, never computed with, so not walked."""
_COMMANDS = "temporal.api.workflowservice.v1.RespondWorkflowTaskCompletedRequest"
_FLOATS = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)


def check_request(message: Message) -> None:
    """Refuse or cap, in place, every bounded value of a decoded request (see the module docstring).

    Raises:
        InvalidArgument: the message names the field (as a dotted path) and the limit.
    """
    # Temporal's frontend refuses it before anything else, and every "namespace X is not found" would
    # otherwise echo an unbounded name into the status, past gRPC's 16 KiB metadata limit.
    namespace = getattr(message, "namespace", None)
    if isinstance(namespace, str) and len(namespace) > MAX_ID_LENGTH:
        raise InvalidArgument("Namespace length exceeds limit.")
    _walk(message, path=(), depth=1, in_commands=False)


def cap_duration(value: Duration) -> None:
    """Fold out-of-range nanos into seconds, and cap the magnitude at 100 years, in place."""
    if not -_NANOS < value.nanos < _NANOS:
        total = value.seconds * _NANOS + value.nanos
        whole, rest = divmod(abs(total), _NANOS)
        sign = -1 if total < 0 else 1
        # Cap before writing back: seconds near int64's ends plus the folded nanos do not fit the field.
        if whole > MAX_DURATION_SECONDS:
            whole, rest = MAX_DURATION_SECONDS, 0
        value.seconds, value.nanos = sign * whole, sign * rest
    if value.seconds > MAX_DURATION_SECONDS or (value.seconds == MAX_DURATION_SECONDS and value.nanos > 0):
        value.seconds, value.nanos = MAX_DURATION_SECONDS, 0
    elif value.seconds < -MAX_DURATION_SECONDS or (
        value.seconds == -MAX_DURATION_SECONDS and value.nanos < 0
    ):
        value.seconds, value.nanos = -MAX_DURATION_SECONDS, 0


def duration_problem(value: Duration) -> str | None:
    """Why Temporal refuses a duration for a timeout, delay or interval, in its words; None if it does not."""
    if (value.seconds > 0 and value.nanos < 0) or (value.seconds < 0 and value.nanos > 0):
        return "duration has seconds and nanos with different signs"
    if value.seconds < 0 or value.nanos < 0:
        return "negative duration"
    return None


def failure_depth_message(path: str) -> str:
    where = path if len(path) <= 80 else f"{path[:40]}...{path[-30:]}"
    return (
        f"Request is nested more than {MAX_DEPTH} messages deep (at {where}); "
        "a failure's chain of causes, say, must be shorter."
    )


# How each field is walked, worked out once per field (descriptors are shared by every message of a type).
_SKIP, _NESTED, _MAP, _FLOAT, _IDENTITY, _TEXT, _TEXT_MAP = range(7)
_FAILURES = "temporal.api.failure.v1."
"""Failures' strings (messages, stack traces) are kept as bytes, never as text columns: NUL is theirs to use."""


def _text(field: FieldDescriptor) -> bool:
    return field.type == FieldDescriptor.TYPE_STRING and not _container(field).full_name.startswith(_FAILURES)


def _container(field: FieldDescriptor) -> Descriptor:
    assert field.containing_type is not None  # every field belongs to a message
    return field.containing_type


def _message_type(field: FieldDescriptor) -> Descriptor:
    """The type of a field that is TYPE_MESSAGE (its descriptor names it)."""
    assert field.message_type is not None
    return field.message_type


_plans: dict[FieldDescriptor, int] = {}
_bounded_cache: dict[str, bool] = {}
_BOUNDED_TYPES = frozenset({_DURATION, _TIMESTAMP, _HEADER})


def _bounded(descriptor: Descriptor, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a message of this type can hold anything bounded here: a Duration, Timestamp or Header, a
    float, a string, or (through recursion, like Failure's cause) unbounded depth. Types that cannot are not
    walked at all."""
    name = descriptor.full_name
    if name in _BOUNDED_TYPES:
        return True
    if name in _USER_DATA:
        return False
    cached = _bounded_cache.get(name)
    if cached is not None:
        return cached
    if name in seen:
        return True  # a type that contains itself nests without end
    found = False
    for field in descriptor.fields:
        if (
            field.type in _FLOATS
            or _text(field)
            or field.type == FieldDescriptor.TYPE_MESSAGE
            and _bounded(_message_type(field), seen | {name})
        ):
            found = True
        if found:
            break
    if not seen:
        _bounded_cache[name] = found
    return found


def _plan(field: FieldDescriptor) -> int:
    plan = _plans.get(field)
    if plan is None:
        plan = _SKIP
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            message = _message_type(field)
            if message.GetOptions().map_entry:
                value = message.fields_by_name["value"]
                if value.type == FieldDescriptor.TYPE_MESSAGE and _bounded(_message_type(value)):
                    plan = _MAP
                elif _text(message.fields_by_name["key"]) or _text(value):
                    plan = _TEXT_MAP
            elif _bounded(message):
                plan = _NESTED
        elif field.type in _FLOATS:
            plan = _FLOAT
        elif field.name == "identity" and field.type == FieldDescriptor.TYPE_STRING:
            plan = _IDENTITY
        elif _text(field):
            plan = _TEXT
        _plans[field] = plan
    return plan


def _walk(message: Message, *, path: tuple, depth: int, in_commands: bool) -> None:
    """`path` is (parent path, name or index) pairs, joined into a dotted name only for a message."""
    if depth > MAX_DEPTH:
        raise InvalidArgument(failure_depth_message(_dotted(path)))
    commands = message.DESCRIPTOR.full_name == _COMMANDS
    for field, value in message.ListFields():
        plan = _plans.get(field)
        if plan is None:
            plan = _plan(field)
        if plan == _SKIP:
            continue
        if plan == _NESTED:
            nested_commands = in_commands or (commands and field.name == "commands")
            if field.is_repeated:
                for i, item in enumerate(value):
                    _message(item, path=(path, field.name, i), depth=depth + 1, in_commands=nested_commands)
            else:
                _message(value, path=(path, field.name), depth=depth + 1, in_commands=nested_commands)
        elif plan == _MAP:
            for key, item in value.items():
                _no_nul(key, (path, field.name))
                _message(item, path=(path, field.name, key), depth=depth + 1, in_commands=in_commands)
        elif plan == _TEXT_MAP:
            for key, item in value.items():
                _no_nul(key, (path, field.name))
                _no_nul(item, (path, field.name, key))
        elif plan == _FLOAT:
            if not in_commands:
                for number in value if field.is_repeated else (value,):
                    if not math.isfinite(number):
                        raise InvalidArgument(
                            f"Invalid {_dotted((path, field.name))}: {number} is not a finite number."
                        )
        else:  # _TEXT or _IDENTITY
            for text in value if field.is_repeated else (value,):
                _no_nul(text, (path, field.name))
            if plan == _IDENTITY and len(value) > MAX_ID_LENGTH:
                raise InvalidArgument("Identity length exceeds limit.")


def _no_nul(text: object, path: tuple) -> None:
    if isinstance(text, str) and "\x00" in text:
        raise InvalidArgument(
            f"Invalid {_dotted(path)}: a string may not contain the NUL character (\\x00); Postgres cannot store it."
        )


def _message(item: Message, *, path: tuple, depth: int, in_commands: bool) -> None:
    kind = item.DESCRIPTOR.full_name
    if kind == _DURATION:
        cap_duration(cast(Duration, item))
    elif kind == _TIMESTAMP:
        timestamp = cast(Timestamp, item)
        seconds, nanos = timestamp.seconds, timestamp.nanos
        if not (MIN_TIMESTAMP_SECONDS <= seconds <= MAX_TIMESTAMP_SECONDS and 0 <= nanos < _NANOS):
            raise InvalidArgument(
                f"Invalid timestamp {_dotted(path)}: it must lie between 0001-01-01 and 9999-12-31 "
                f"with nanos in [0, 999999999] (seconds={seconds}, nanos={nanos})."
            )
    elif kind == _HEADER:
        size = item.ByteSize()
        if size > BLOB_SIZE_LIMIT:
            raise InvalidArgument(
                f"Header size exceeds limit. The {_dotted(path)} is {size} bytes; "
                f"the limit is {BLOB_SIZE_LIMIT} bytes (2 MiB)."
            )
    else:
        _walk(item, path=path, depth=depth, in_commands=in_commands)


def _dotted(path: tuple) -> str:
    """(((), "schedule"), "spec"), "start_time") -> "schedule.spec.start_time"; indexes and keys in brackets."""
    parts: list[str] = []
    while path:
        parent, name, *key = path
        parts.append(f"{name}[{key[0]!r}]" if key else name)
        path = parent
    return ".".join(reversed(parts))
