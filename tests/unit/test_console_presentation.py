"""The console's pure presentation rules: payload decoding, event names and summaries, compact groups,
and where a filter error points."""

from __future__ import annotations

import base64
import json

from temporalio.api.common.v1 import ActivityType, Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import (
    ActivityTaskCompletedEventAttributes,
    ActivityTaskScheduledEventAttributes,
    ActivityTaskStartedEventAttributes,
    HistoryEvent,
    WorkflowExecutionSignaledEventAttributes,
    WorkflowTaskScheduledEventAttributes,
)

from frontend import history, payloads
from frontend.views.workflows import _problem
from visibility.query.parser import QueryError, parse


def _json(value: object) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


def test_payloads_decode_by_encoding():
    assert payloads.decode(_json({"b": [1, 2]})).text == '{\n  "b": [\n    1,\n    2\n  ]\n}'
    assert payloads.decode(Payload(metadata={"encoding": b"binary/null"})).kind == "null"
    raw = bytes(range(5))
    binary = payloads.decode(Payload(metadata={"encoding": b"binary/plain"}, data=raw))
    assert (binary.kind, binary.text) == ("base64", base64.b64encode(raw).decode())
    broken = payloads.decode(Payload(metadata={"encoding": b"json/plain"}, data=b"{not json"))
    assert broken.kind == "base64"
    encrypted = payloads.decode(Payload(metadata={"encoding": b"binary/encrypted"}, data=b"x"))
    assert (encrypted.encoding, encrypted.kind) == ("binary/encrypted", "base64")


def _signal(event_id: int, name: str, value: object) -> HistoryEvent:
    return HistoryEvent(
        event_id=event_id,
        event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        workflow_execution_signaled_event_attributes=WorkflowExecutionSignaledEventAttributes(
            signal_name=name, input=Payloads(payloads=[_json(value)])
        ),
    )


def test_event_rows_decode_payloads_in_their_json():
    row = history.event_row(_signal(7, "approve", {"by": "<b>ann</b>"}))
    assert row.name == "WorkflowExecutionSignaled"
    assert row.category == "signal"
    assert row.subject == "Signal: approve"
    assert row.summary == 'signal name: approve · input: {"by": "<b>ann</b>"}'
    raw = json.loads(row.raw)
    assert raw["workflowExecutionSignaledEventAttributes"]["input"]["payloads"] == [{"by": "<b>ann</b>"}]


def test_compact_groups_an_activity_and_drops_workflow_tasks():
    events = [
        HistoryEvent(
            event_id=2,
            event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
            workflow_task_scheduled_event_attributes=WorkflowTaskScheduledEventAttributes(),
        ),
        HistoryEvent(
            event_id=5,
            event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
            activity_task_scheduled_event_attributes=ActivityTaskScheduledEventAttributes(
                activity_id="1", activity_type=ActivityType(name="charge")
            ),
        ),
        _signal(6, "nudge", 1),
        HistoryEvent(
            event_id=7,
            event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
            activity_task_started_event_attributes=ActivityTaskStartedEventAttributes(scheduled_event_id=5),
        ),
        HistoryEvent(
            event_id=8,
            event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
            activity_task_completed_event_attributes=ActivityTaskCompletedEventAttributes(
                scheduled_event_id=5, started_event_id=7
            ),
        ),
    ]
    groups = [history.group_rows(g) for g in history.compact_groups(events)]
    assert [[e.event_id for e in g.events] for g in groups] == [[5, 7, 8], [6]]
    assert (groups[0].title, groups[0].state) == ("Activity: charge", "Completed")
    assert (groups[1].title, groups[1].state) == ("Signal: nudge", "Signaled")


def test_filter_error_points_at_the_parsers_position():
    query = 'WorkflowType = = "x"'
    try:
        parse(query)
    except QueryError as e:
        problem = _problem(query, e)
    assert problem.position == 16
    assert (problem.before, problem.at, problem.after) == ("WorkflowType = ", "=", ' "x"')
    end = "WorkflowType ="
    try:
        parse(end)
    except QueryError as e:
        problem = _problem(end, e)
    assert (problem.before, problem.at) == (end, " ")


def test_an_erased_payload_shows_as_erased():
    """A payload whose data subject was erased (the server's marker) reads "erased" in the summary, the
    payload list and the raw JSON, never as base64 of nothing."""
    marker = Payload(metadata={"encoding": b"binary/x-perdura-erased", "perdura-subject-key": b"k"})
    assert payloads.decode(marker) == payloads.Decoded(
        encoding="binary/x-perdura-erased", kind="erased", text="erased"
    )
    event = _signal(3, "approve", "x")
    event.workflow_execution_signaled_event_attributes.input.payloads[0].CopyFrom(marker)
    row = history.event_row(event)
    assert row.summary == "signal name: approve · input: erased"
    raw = json.loads(row.raw)
    assert raw["workflowExecutionSignaledEventAttributes"]["input"]["payloads"] == [
        {"encoding": "binary/x-perdura-erased", "erased": True}
    ]
    from django.template.loader import render_to_string

    html = render_to_string("frontend/_payloads.html", {"payloads": [payloads.decode(marker)]})
    assert "erased</p>" in html
    assert "<pre" not in html
