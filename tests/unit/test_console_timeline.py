"""The run page's timeline (frontend/timeline.py): history events and pending activities to bars, and a
page of bars to positions on the axis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import PendingActivityInfo

from frontend import timeline

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
E = EventType


def _ts(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(T0 + timedelta(seconds=seconds))
    return stamp


class History:
    """Events with dense ids, each at `at` seconds after T0."""

    def __init__(self) -> None:
        self.events: list[HistoryEvent] = []

    def add(self, at: float, event_type: int, field: str, **attrs) -> int:
        event = HistoryEvent(event_id=len(self.events) + 1, event_type=event_type, event_time=_ts(at))
        target = getattr(event, field)
        target.SetInParent()
        for key, value in attrs.items():
            if isinstance(value, dict):
                for k, v in value.items():
                    setattr(getattr(target, key), k, v)
            elif hasattr(value, "DESCRIPTOR"):
                getattr(target, key).CopyFrom(value)
            else:
                setattr(target, key, value)
        self.events.append(event)
        return event.event_id

    def start(self, at: float = 0) -> int:
        return self.add(
            at,
            E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
            "workflow_execution_started_event_attributes",
            workflow_type={"name": "Order"},
        )

    def activity(self, at: float, name: str, activity_id: str) -> int:
        return self.add(
            at,
            E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
            "activity_task_scheduled_event_attributes",
            activity_type={"name": name},
            activity_id=activity_id,
        )


def by_label(bars: list[timeline.Bar]) -> dict[str, timeline.Bar]:
    return {b.label: b for b in bars}


def test_a_completed_run_has_its_activities_timers_signals_and_children_as_bars_in_opening_order():
    h = History()
    h.start()
    charge = h.activity(1, "Charge", "1")
    h.add(
        2,
        E.EVENT_TYPE_ACTIVITY_TASK_STARTED,
        "activity_task_started_event_attributes",
        scheduled_event_id=charge,
        attempt=1,
    )
    h.add(
        5,
        E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        "activity_task_completed_event_attributes",
        scheduled_event_id=charge,
    )
    timer = h.add(5, E.EVENT_TYPE_TIMER_STARTED, "timer_started_event_attributes", timer_id="wait")
    h.add(
        6,
        E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        "workflow_execution_signaled_event_attributes",
        signal_name="approve",
    )
    h.add(
        15, E.EVENT_TYPE_TIMER_FIRED, "timer_fired_event_attributes", started_event_id=timer, timer_id="wait"
    )
    child = h.add(
        16,
        E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        "start_child_workflow_execution_initiated_event_attributes",
        workflow_type={"name": "Ship"},
        workflow_id="ship-1",
    )
    h.add(
        17,
        E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
        "child_workflow_execution_started_event_attributes",
        initiated_event_id=child,
        workflow_execution={"workflow_id": "ship-1", "run_id": "r-ship"},
    )
    h.add(
        19,
        E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
        "child_workflow_execution_failed_event_attributes",
        initiated_event_id=child,
        failure=Failure(message="no truck"),
    )
    h.add(20, E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, "workflow_execution_completed_event_attributes")

    bars = timeline.bars(h.events)

    assert [(b.kind, b.label, b.state) for b in bars] == [
        ("workflow", "Workflow: Order", "Completed"),
        ("activity", "Activity: Charge", "Completed"),
        ("timer", "Timer: wait", "Fired"),
        ("signal", "Signal: approve", "Received"),
        ("child", "Child workflow: Ship", "Failed"),
    ]
    shown = by_label(bars)
    assert shown["Workflow: Order"].end == T0 + timedelta(seconds=20)
    charge_bar = shown["Activity: Charge"]
    assert [(s.kind, s.start, s.end) for s in timeline.segments(charge_bar)] == [
        ("wait", T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)),
        ("run", T0 + timedelta(seconds=2), T0 + timedelta(seconds=5)),
    ]
    assert shown["Timer: wait"].end == T0 + timedelta(seconds=15)
    signal = shown["Signal: approve"]
    assert signal.point
    assert timeline.segments(signal) == []
    assert signal.start == T0 + timedelta(seconds=6)
    ship = shown["Child workflow: Ship"]
    assert ship.link == ("ship-1", "r-ship")
    assert ship.detail == "no truck"
    assert not any(b.open for b in bars)


def test_a_retried_activity_shows_its_earlier_attempts_and_the_last_one():
    h = History()
    h.start()
    charge = h.activity(1, "Charge", "1")
    h.add(
        9,
        E.EVENT_TYPE_ACTIVITY_TASK_STARTED,
        "activity_task_started_event_attributes",
        scheduled_event_id=charge,
        attempt=4,
        last_failure=Failure(message="card declined"),
    )
    h.add(
        10,
        E.EVENT_TYPE_ACTIVITY_TASK_FAILED,
        "activity_task_failed_event_attributes",
        scheduled_event_id=charge,
        failure=Failure(message="declined again"),
    )

    bar = by_label(timeline.bars(h.events))["Activity: Charge"]

    assert (bar.state, bar.attempt, bar.detail) == ("Failed", 4, "declined again")
    assert [(s.kind, s.label, s.start, s.end) for s in timeline.segments(bar)] == [
        ("retries", "attempts 1–3 (retried)", T0 + timedelta(seconds=1), T0 + timedelta(seconds=9)),
        ("run", "attempt 4", T0 + timedelta(seconds=9), T0 + timedelta(seconds=10)),
    ]


def test_pending_activities_are_drawn_to_now_with_their_attempt_failure_and_backoff():
    h = History()
    h.start()
    h.activity(1, "Charge", "charge")
    h.activity(1, "Ship", "ship")
    h.activity(2, "Email", "email")
    now = T0 + timedelta(seconds=60)
    backing_off = PendingActivityInfo(
        activity_id="charge",
        state=PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED,
        attempt=3,
        last_failure=Failure(message="card declined"),
        last_attempt_complete_time=_ts(50),
        next_attempt_schedule_time=_ts(70),
    )
    running = PendingActivityInfo(
        activity_id="ship",
        state=PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
        attempt=2,
        last_started_time=_ts(40),
    )

    bars = by_label(timeline.bars(h.events, pending=[backing_off, running]))

    charge = bars["Activity: Charge"]
    assert charge.open
    assert (charge.state, charge.attempt, charge.detail) == ("Scheduled", 3, "card declined")
    assert [(s.kind, s.label, s.start, s.end) for s in timeline.segments(charge)] == [
        ("retries", "attempts 1–2", T0 + timedelta(seconds=1), T0 + timedelta(seconds=50)),
        ("backoff", "next attempt at 12:01:10", T0 + timedelta(seconds=50), None),
    ]
    ship = bars["Activity: Ship"]
    assert (ship.state, ship.attempt) == ("Running", 2)
    assert [(s.kind, s.start, s.end) for s in timeline.segments(ship)] == [
        ("retries", T0 + timedelta(seconds=1), T0 + timedelta(seconds=40)),
        ("run", T0 + timedelta(seconds=40), None),
    ]
    email = bars["Activity: Email"]
    assert (email.state, email.attempt) == ("Scheduled", 1)
    assert [(s.kind, s.end) for s in timeline.segments(email)] == [("wait", None)]
    workflow = bars["Workflow: Order"]
    assert workflow.open
    assert workflow.state == "Running"

    page = timeline.layout(list(bars.values()), now=now)
    rows = {r.bar.label: r for r in page.rows}
    # Open bars end at now, the axis's right end, and carry a mark there.
    assert rows["Activity: Email"].drawn[-1].x + rows["Activity: Email"].drawn[-1].width == 100
    assert rows["Activity: Email"].mark == 100
    assert "attempt 3" in rows["Activity: Charge"].title
    assert "card declined" in rows["Activity: Charge"].title


def test_updates_external_signals_and_cancels_close_their_own_bars():
    h = History()
    h.start()
    accepted = HistoryEvent(
        event_id=2, event_type=E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, event_time=_ts(1)
    )
    accepted.workflow_execution_update_accepted_event_attributes.accepted_request.input.name = "set_price"
    h.events.append(accepted)
    h.add(
        3,
        E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
        "workflow_execution_update_completed_event_attributes",
        accepted_event_id=2,
    )
    signal = h.add(
        4,
        E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
        "signal_external_workflow_execution_initiated_event_attributes",
        signal_name="poke",
    )
    h.add(
        5,
        E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED,
        "external_workflow_execution_signaled_event_attributes",
        initiated_event_id=signal,
    )
    h.add(
        6,
        E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
        "workflow_execution_cancel_requested_event_attributes",
    )

    bars = by_label(timeline.bars(h.events))

    assert (bars["Update: set_price"].state, bars["Update: set_price"].end) == (
        "Completed",
        T0 + timedelta(seconds=3),
    )
    assert (bars["Signal external: poke"].state, bars["Signal external: poke"].end) == (
        "Completed",
        T0 + timedelta(seconds=5),
    )
    # A cancel request notes the run's bar, which stays open.
    assert bars["Workflow: Order"].state == "CancelRequested"
    assert bars["Workflow: Order"].open


def test_layout_pages_rows_newest_first_and_spans_the_axis_over_the_rows_shown():
    h = History()
    h.start()
    for n in range(250):
        h.add(
            n + 1,
            E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
            "workflow_execution_signaled_event_attributes",
            signal_name=f"s{n}",
        )
    now = T0 + timedelta(seconds=300)
    bars = timeline.bars(h.events)
    assert len(bars) == 251

    newest = timeline.layout(bars, now=now)
    assert (newest.page, newest.pages, newest.total, newest.first_row) == (3, 3, 251, 201)
    assert [r.bar.label for r in newest.rows[:2]] == ["Signal: s199", "Signal: s200"]
    # The newest page's axis starts at its first row and ends at now (its rows are points).
    assert newest.start == T0 + timedelta(seconds=200)
    assert newest.end == T0 + timedelta(seconds=250)
    assert newest.rows[0].mark == 0
    assert newest.rows[-1].mark == 100
    assert newest.ticks[0].label == "0"
    assert all(0 <= t.x <= 100 for t in newest.ticks)

    first = timeline.layout(bars, now=now, page=1)
    assert first.rows[0].bar.label == "Workflow: Order"
    assert first.end == now
    assert len(first.rows) == 100
    assert timeline.layout(bars, now=now, page=99).page == 3


def test_an_empty_or_partial_history_is_drawn_without_errors():
    assert timeline.layout([], now=T0).rows == []
    h = History()
    h.start()
    # A close whose opening event is not in the events given (a page of them) is skipped.
    h.add(
        1,
        E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
        "activity_task_completed_event_attributes",
        scheduled_event_id=99,
    )
    bars = timeline.bars(h.events)
    assert [b.label for b in bars] == ["Workflow: Order"]
    page = timeline.layout(bars, now=T0 + timedelta(seconds=2))
    assert page.rows[0].drawn[0].x == 0
    assert page.rows[0].drawn[0].width == 100
