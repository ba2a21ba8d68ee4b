"""The chain around a run, read from its own events: parent, root, children, the runs before and after it
(continue-as-new, cron, retry, reset).

Pure (events in, JSON out): the history already names every run it is linked to, so the export's
links need no other lookup and say nothing the signed history does not also say.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent

_CLOSE_ATTRIBUTES = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "workflow_execution_completed_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "workflow_execution_failed_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "workflow_execution_timed_out_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: (
        "workflow_execution_continued_as_new_event_attributes"
    ),
}


def _execution(namespace: str, workflow_id: str, run_id: str) -> dict[str, Any]:
    return {"namespace": namespace, "workflow_id": workflow_id, "run_id": run_id or None}


def links(*, namespace: str, events: Iterable[HistoryEvent]) -> dict[str, Any]:
    """Parent, root, previous and next runs, the run a reset started from, and children (by initiating
    event), by id."""
    out: dict[str, Any] = {
        "parent": None,
        "root": None,
        "first_execution_run_id": None,
        "continued_from_run_id": None,
        "original_execution_run_id": None,
        "next_run": None,
        "children": [],
        "reset_from": None,
    }
    children: dict[int, dict[str, Any]] = {}
    for event in events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            a = event.workflow_execution_started_event_attributes
            if a.HasField("parent_workflow_execution"):
                out["parent"] = {
                    **_execution(
                        a.parent_workflow_namespace or namespace,
                        a.parent_workflow_execution.workflow_id,
                        a.parent_workflow_execution.run_id,
                    ),
                    "initiated_event_id": a.parent_initiated_event_id or None,
                }
            if a.HasField("root_workflow_execution"):
                root = a.root_workflow_execution
                out["root"] = _execution(namespace, root.workflow_id, root.run_id)
            out["first_execution_run_id"] = a.first_execution_run_id or None
            out["continued_from_run_id"] = a.continued_execution_run_id or None
            out["original_execution_run_id"] = a.original_execution_run_id or None
        elif kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            initiated = event.start_child_workflow_execution_initiated_event_attributes
            children[event.event_id] = {
                **_execution(initiated.namespace or namespace, initiated.workflow_id, ""),
                "workflow_type": initiated.workflow_type.name,
                "initiated_event_id": event.event_id,
                "outcome": "initiated",
            }
        elif kind == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
            started = event.child_workflow_execution_started_event_attributes
            child = children.get(started.initiated_event_id)
            if child is not None:
                child["run_id"] = started.workflow_execution.run_id or None
                child["outcome"] = "started"
        elif kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED:
            start_failed = event.start_child_workflow_execution_failed_event_attributes
            child = children.get(start_failed.initiated_event_id)
            if child is not None:
                child["outcome"] = "start_failed"
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            task_failed = event.workflow_task_failed_event_attributes
            reset = task_failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
            if reset and task_failed.base_run_id:
                # A reset run repeats its base's events up to the reset point, then fails that task naming both.
                out["reset_from"] = {
                    "base_run_id": task_failed.base_run_id,
                    "failed_event_id": event.event_id,
                }
        elif kind in _CLOSE_ATTRIBUTES:
            a = getattr(event, _CLOSE_ATTRIBUTES[kind])
            if a.new_execution_run_id:
                # A continue-as-new names its next run; a completed, failed or timed-out run names one
                # only when a cron schedule or a retry policy starts it (the events do not say which).
                continued = kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
                out["next_run"] = {
                    "run_id": a.new_execution_run_id,
                    "reason": "continued_as_new" if continued else "cron_or_retry",
                }
    out["children"] = list(children.values())
    return out
