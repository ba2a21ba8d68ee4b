"""Engine values as protobuf values: times, durations and a run's task queue, as every response writes them."""

from __future__ import annotations

from datetime import datetime, timedelta

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.enums.v1 import TaskQueueKind
from temporalio.api.taskqueue.v1 import TaskQueue

from engine.history.events import set_time
from visibility.search_attributes import from_micros


def ts(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    out = Timestamp()
    set_time(out, value)
    return out


def ts_micros(value: int | None) -> Timestamp | None:
    """A visibility record's time (microseconds since the epoch) as a Timestamp."""
    return ts(from_micros(value)) if value is not None else None


def dur(seconds: float) -> Duration | None:
    if not seconds:
        return None
    out = Duration()
    out.FromTimedelta(timedelta(seconds=seconds))
    return out


def normal_queue(name: str) -> TaskQueue:
    return TaskQueue(name=name, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL)
