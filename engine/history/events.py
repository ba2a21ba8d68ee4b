"""The only event factory: HistoryEvents from their attribute messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

# attributes message name -> (HistoryEvent field, EventType)
_FIELDS: dict[str, tuple[str, EventType.ValueType]] = {}
for _field in HistoryEvent.DESCRIPTOR.oneofs_by_name["attributes"].fields:
    _stem = _field.name.removesuffix("_event_attributes").upper()
    assert _field.message_type is not None  # every oneof member is a message
    _FIELDS[_field.message_type.full_name] = (_field.name, EventType.Value("EVENT_TYPE_" + _stem))


def new_event(attributes: Message) -> HistoryEvent:
    """A HistoryEvent carrying `attributes`, its type derived from the attributes' message type."""
    field_name, event_type = _FIELDS[attributes.DESCRIPTOR.full_name]
    event = HistoryEvent(event_type=event_type)
    getattr(event, field_name).CopyFrom(attributes)
    return event


def attributes(event: HistoryEvent) -> Any:
    """The event's attributes message; Any, as its type depends on the event type (callers read shared fields)."""
    field = event.WhichOneof("attributes")
    assert field is not None  # new_event sets the attributes of every event
    return getattr(event, field)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def set_time(target: Timestamp, at: datetime) -> None:
    """`target.FromDatetime(at)` (a naive `at` taken as UTC), in a tenth of its time: protobuf's goes
    through a time tuple and calendar.timegm, and every event, task and response carries times."""
    delta = (at if at.tzinfo is not None else at.replace(tzinfo=UTC)) - _EPOCH
    target.seconds = delta.days * 86400 + delta.seconds
    target.nanos = delta.microseconds * 1000


def duration(seconds: float) -> Duration:
    value = Duration()
    value.FromTimedelta(timedelta(seconds=seconds))
    return value


def seconds(value: Duration) -> float:
    return value.ToTimedelta().total_seconds()


def string_payloads(text: str) -> Payloads:
    """A JSON string payload, as the server encodes its own strings (payloads.EncodeString)."""
    return Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=f'"{text}"'.encode())])
