"""bench/latency.py end to end against `perdura dev`, small: it measures timer lateness and activity dispatch
from the histories, and its rules read those histories as intended."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import (
    ActivityTaskStartedEventAttributes,
    HistoryEvent,
    TimerFiredEventAttributes,
)

from tests.support import servers

sys.path.insert(0, str(servers.ROOT / "bench"))
import latency  # noqa: E402  (bench/ is scripts, not a package)

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _event(event_id: int, event_type: int, at: timedelta, **attributes) -> HistoryEvent:
    event = HistoryEvent(event_id=event_id, event_type=event_type, **attributes)
    event.event_time.FromDatetime(T0 + at)
    return event


def test_lateness_and_dispatch_are_read_from_the_servers_timestamps():
    timer = [
        _event(5, EventType.EVENT_TYPE_TIMER_STARTED, timedelta(0)),
        _event(
            6,
            EventType.EVENT_TYPE_TIMER_FIRED,
            timedelta(seconds=2, milliseconds=7),
            timer_fired_event_attributes=TimerFiredEventAttributes(started_event_id=5),
        ),
    ]
    assert latency.timer_lateness_ms(timer, 2.0) == [pytest.approx(7.0)]
    activity = [
        _event(5, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, timedelta(0)),
        _event(
            6,
            EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
            timedelta(milliseconds=3),
            activity_task_started_event_attributes=ActivityTaskStartedEventAttributes(scheduled_event_id=5),
        ),
    ]
    assert latency.dispatch_ms(activity) == [pytest.approx(3.0)]


def test_rounds_are_combined_by_their_medians():
    def one(p50: float, p99: float, top: float) -> dict:
        stats = {"samples": 10, "p50": p50, "p90": p50, "p99": p99, "max": top}
        return {"timer_lateness_ms": stats, "activity_dispatch_ms": stats}

    result = latency.combined([one(1, 10, 11), one(3, 90, 95), one(2, 20, 21)])
    timers = result["timer_lateness_ms"]
    assert (timers["samples"], timers["p50"], timers["p99"], timers["max"]) == (30, 2, 20, 95)
    assert len(timers["rounds"]) == 3


def test_the_benchmark_runs_against_the_dev_server(dev_server, tmp_path):
    out = tmp_path / "latency.json"
    done = subprocess.run(
        [
            sys.executable,
            "bench/latency.py",
            *("--address", dev_server.address, "--timers", "5", "--timer-seconds", "0.5"),
            *("--activity-workflows", "10", "--concurrency", "4", "--rounds", "2", "--json", str(out)),
        ],
        cwd=servers.ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["timer_lateness_ms"]["samples"] == 10
    assert result["activity_dispatch_ms"]["samples"] == 20
    assert [r["samples"] for r in result["timer_lateness_ms"]["rounds"]] == [5, 5]
    # No timer fires early; every activity started after it was scheduled.
    assert result["timer_lateness_ms"]["p50"] >= 0
    assert result["activity_dispatch_ms"]["p50"] >= 0
