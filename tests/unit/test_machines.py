"""State machines of pending things: a transition from a state it does not start from is a bug, said clearly."""

from __future__ import annotations

import pytest

from engine.history.errors import InvalidTransition
from engine.history.machines import ActivityState, ChildState, transition
from engine.history.state import ChildInfo
from tests.unit.history_harness import Run, schedule_activity


def test_a_transition_moves_a_thing_from_a_source_state_to_its_destination():
    child = ChildInfo(initiated_event_id=5, workflow_id="c", workflow_type="T")
    assert child.state is ChildState.INITIATED
    with transition(child, {ChildState.INITIATED}, ChildState.STARTED):
        child.run_id = "r"
    assert child.state is ChildState.STARTED


def test_a_transition_from_another_state_raises_before_anything_changes():
    child = ChildInfo(initiated_event_id=5, workflow_id="c", workflow_type="T", run_id="r")
    with (
        pytest.raises(InvalidTransition, match="ChildInfo: no transition from STARTED to STARTED") as raised,
        transition(child, {ChildState.INITIATED}, ChildState.STARTED),
    ):
        child.run_id = "other"
    assert "allowed from INITIATED" in str(raised.value)
    assert child.run_id == "r"


def test_a_transition_that_does_not_reach_its_destination_raises():
    child = ChildInfo(initiated_event_id=5, workflow_id="c", workflow_type="T")
    with (
        pytest.raises(InvalidTransition, match="from INITIATED to STARTED left it INITIATED"),
        transition(child, {ChildState.INITIATED}, ChildState.STARTED),
    ):
        pass


def test_activity_state_follows_its_attempts():
    run = Run()
    run.start_wft(1)
    assert run.complete_wft(2, schedule_activity("a", start_to_close=10)) is None
    info = run.state.activities[5]
    assert info.state is ActivityState.SCHEDULED
    run.start_activity(3, 5)
    assert run.state.activities[5].state is ActivityState.STARTED
    run.fail_activity(4, 5)
    assert run.state.activities[5].state is ActivityState.SCHEDULED
    assert run.state.activities[5].attempt == 2
