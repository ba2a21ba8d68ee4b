"""`events.set_time`: the same Timestamp as protobuf's own `FromDatetime`, for any datetime."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from google.protobuf.timestamp_pb2 import Timestamp

from engine.history.events import set_time


def _both(value: datetime) -> tuple[Timestamp, Timestamp]:
    theirs, ours = Timestamp(), Timestamp()
    theirs.FromDatetime(value)
    set_time(ours, value)
    return theirs, ours


def test_set_time_agrees_with_protobuf_for_aware_naive_and_offset_datetimes():
    rng = random.Random(17)
    low, high = datetime(2, 1, 1, tzinfo=UTC), datetime(9998, 1, 1, tzinfo=UTC)
    span = int((high - low).total_seconds() * 1_000_000)
    for _ in range(2000):
        naive = (low + timedelta(microseconds=rng.randrange(span))).replace(tzinfo=None)
        offset = timezone(timedelta(minutes=rng.randrange(-14 * 60, 14 * 60)))
        for value in (naive, naive.replace(tzinfo=UTC), naive.replace(tzinfo=offset)):
            theirs, ours = _both(value)
            assert ours == theirs, value


def test_set_time_before_the_epoch_and_at_its_edges():
    for value in (
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ):
        theirs, ours = _both(value)
        assert (ours.seconds, ours.nanos) == (theirs.seconds, theirs.nanos), value
