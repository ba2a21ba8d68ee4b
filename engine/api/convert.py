"""Conversions between engine values and Temporal API messages."""

from __future__ import annotations

from datetime import datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp


def ts(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    out = Timestamp()
    out.FromDatetime(value)
    return out


def dur(seconds: float) -> Duration | None:
    if not seconds:
        return None
    out = Duration()
    out.FromTimedelta(timedelta(seconds=seconds))
    return out
