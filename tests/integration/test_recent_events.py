"""A run's recent events kept in memory (engine/services/recent_events.py) are exactly what its history holds:
only committed changes, only gapless stretches, nothing of a run with a data subject; a closed run's close."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import transaction
from temporalio.api.common.v1 import Payload, SearchAttributes, WorkflowType
from temporalio.api.enums.v1 import EventType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.history.subjects import DATA_SUBJECT
from engine.persistence import store
from engine.services import recent_events, workflows
from tenants.models import Namespace
from tenants.services.namespaces import namespace_register

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _kept(monkeypatch):
    """As in a process that answers polls; nothing kept from one test to the next."""
    monkeypatch.setattr(recent_events, "_enabled", True)
    recent_events.clear()
    yield
    recent_events.clear()


@pytest.fixture
def namespace() -> Namespace:
    return namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")


def _start(namespace: Namespace, *, subject: str | None = None) -> str:
    workflow_id = f"wf-{uuid.uuid4()}"
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=workflow_id,
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name="tq"),
        request_id=str(uuid.uuid4()),
    )
    if subject is not None:
        request.search_attributes.CopyFrom(
            SearchAttributes(
                indexed_fields={
                    DATA_SUBJECT: Payload(
                        metadata={"encoding": b"json/plain"}, data=json.dumps(subject).encode()
                    )
                }
            )
        )
    workflows.workflow_start(namespace=namespace, request=request)
    return workflow_id


def _signal(namespace: Namespace, workflow_id: str) -> None:
    workflows.workflow_signal(
        namespace=namespace,
        workflow_id=workflow_id,
        run_id="",
        signal_name="s",
        input=None,
        identity="test",
        request_id=str(uuid.uuid4()),
        header=None,
    )


def _run(namespace: Namespace, workflow_id: str):
    return store.find_execution(namespace.id, workflow_id, "", lock=False)


def _stored(execution, first: int, last: int):
    return list(store.history_events(execution, first_event_id=first, last_event_id=last))


def test_committed_changes_are_kept_and_equal_the_stored_history(namespace):
    workflow_id = _start(namespace)  # events 1-2
    for _ in range(3):
        _signal(namespace, workflow_id)  # events 3, 4, 5
    execution = _run(namespace, workflow_id)
    assert execution.next_event_id == 6
    kept = recent_events.history(execution, 1, 5)
    assert kept is not None
    assert kept == _stored(execution, 1, 5)
    assert recent_events.history(execution, 4, 5) == _stored(execution, 4, 5)
    # Asked for an event it does not hold: the caller reads the history.
    assert recent_events.history(execution, 3, 6) is None


def test_a_change_made_elsewhere_leaves_a_gap_and_the_stretch_starts_again(namespace, monkeypatch):
    workflow_id = _start(namespace)
    _signal(namespace, workflow_id)  # 3, kept
    monkeypatch.setattr(recent_events, "_enabled", False)  # another process writes 4
    _signal(namespace, workflow_id)
    monkeypatch.setattr(recent_events, "_enabled", True)
    _signal(namespace, workflow_id)  # 5: does not follow 3
    execution = _run(namespace, workflow_id)
    assert recent_events.history(execution, 3, 5) is None
    assert recent_events.history(execution, 4, 5) is None
    assert recent_events.history(execution, 5, 5) == _stored(execution, 5, 5)


def test_a_change_that_does_not_commit_is_not_kept(namespace):
    workflow_id = _start(namespace)
    _signal(namespace, workflow_id)  # 3

    class Abandon(Exception):
        pass

    def signal_then_abandon() -> None:
        with transaction.atomic():
            _signal(namespace, workflow_id)  # 4, rolled back
            raise Abandon

    with pytest.raises(Abandon):
        signal_then_abandon()
    _signal(namespace, workflow_id)  # 4 again, committed
    execution = _run(namespace, workflow_id)
    assert recent_events.history(execution, 3, 4) == _stored(execution, 3, 4)


def test_a_closed_runs_close_event_is_kept(namespace):
    workflow_id = _start(namespace)
    _signal(namespace, workflow_id)
    execution = _run(namespace, workflow_id)
    assert recent_events.close_event(execution) is None  # open
    workflows.workflow_terminate(
        namespace=namespace, workflow_id=workflow_id, run_id="", reason="done", details=None, identity="t"
    )
    execution = _run(namespace, workflow_id)
    close = recent_events.close_event(execution)
    assert close is not None
    assert [close] == _stored(execution, execution.next_event_id - 1, execution.next_event_id - 1)
    assert close.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED


def test_a_run_with_a_data_subject_is_never_kept(namespace):
    workflow_id = _start(namespace, subject="user-17")
    _signal(namespace, workflow_id)
    execution = _run(namespace, workflow_id)
    assert recent_events.history(execution, 3, 3) is None
