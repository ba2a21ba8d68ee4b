"""The bounds of engine/services/recent_events.py: a run's stretch keeps its newest events within its byte
budget, and only `MAX_RUNS` runs are kept, the least recently changed dropped first."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.history.v1 import HistoryEvent, WorkflowExecutionSignaledEventAttributes

from engine.services import recent_events


@pytest.fixture(autouse=True)
def _empty():
    recent_events.clear()
    yield
    recent_events.clear()


def _events(first: int, count: int, *, payload_bytes: int = 10) -> list[HistoryEvent]:
    return [
        HistoryEvent(
            event_id=first + i,
            workflow_execution_signaled_event_attributes=WorkflowExecutionSignaledEventAttributes(
                input=Payloads(payloads=[Payload(data=b"x" * payload_bytes)])
            ),
        )
        for i in range(count)
    ]


def _run(pk: int) -> SimpleNamespace:
    return SimpleNamespace(pk=pk)


def test_a_stretch_over_its_budget_keeps_its_newest_events(monkeypatch):
    monkeypatch.setattr(recent_events, "MAX_RUN_BYTES", 1000)
    recent_events._remember(1, _events(1, 5, payload_bytes=300))  # over 1,000 bytes: the oldest go
    kept = recent_events.history(_run(1), 1, 5)
    assert kept is None
    newest = recent_events.history(_run(1), 3, 5)
    assert [e.event_id for e in newest or []] == [3, 4, 5]
    assert recent_events.history(_run(1), 2, 5) is None


def test_one_change_over_the_budget_by_itself_keeps_nothing(monkeypatch):
    monkeypatch.setattr(recent_events, "MAX_RUN_BYTES", 100)
    recent_events._remember(1, _events(1, 2, payload_bytes=10))
    recent_events._remember(1, _events(3, 1, payload_bytes=500))
    assert recent_events.history(_run(1), 3, 3) is None
    assert recent_events.history(_run(1), 1, 2) is None


def test_the_least_recently_changed_run_goes_first(monkeypatch):
    monkeypatch.setattr(recent_events, "MAX_RUNS", 2)
    recent_events._remember(1, _events(1, 1))
    recent_events._remember(2, _events(1, 1))
    recent_events._remember(1, _events(2, 1))  # run 1 changed again: run 2 is now the oldest
    recent_events._remember(3, _events(1, 1))
    assert recent_events.history(_run(2), 1, 1) is None
    assert [e.event_id for e in recent_events.history(_run(1), 1, 2) or []] == [1, 2]
    assert recent_events.history(_run(3), 1, 1) is not None


def test_an_empty_or_reversed_range_is_not_answered():
    recent_events._remember(1, _events(1, 3))
    assert recent_events.history(_run(1), 3, 2) is None
    assert recent_events.history(_run(7), 1, 1) is None
