"""A claim that leaves a task queue empty lets the next poll answer from memory until a wake-up comes
(engine/services/task_claims.py, engine/notify.py): a worker polls again as soon as it takes a task, and
that poll used to cost a transaction that found nothing."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from perdura import clock
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine import dbthreads, notify
from engine.api.rpc import waits
from engine.matching import queue
from engine.services import workflow_tasks, workflows
from tenants.services.namespaces import namespace_register

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _start(namespace, task_queue: str) -> None:
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name=task_queue),
    )
    workflows.workflow_start(namespace=namespace, request=request)


def _poll(namespace, task_queue: str):
    return workflow_tasks.poll_once(
        namespace=namespace, task_queue=task_queue, identity="worker", request_id=str(uuid.uuid4())
    )


def _from_memory(answer) -> None:
    """An answer from memory: nothing to take, and look again once the memory lapses (if no wake-up came)."""
    assert isinstance(answer, queue.NotYet)
    assert answer.visible_at is not None
    assert clock.now() < answer.visible_at <= clock.now() + notify.EMPTY_FOR


def test_the_poll_after_the_last_task_is_taken_costs_no_statement_until_a_new_task_comes():
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    task_queue = f"tq-{uuid.uuid4()}"
    _start(namespace, task_queue)
    _start(namespace, task_queue)

    # Two tasks: taking the first leaves one, so the queue is not known empty.
    assert isinstance(_poll(namespace, task_queue), workflow_tasks.StartedWorkflowTask)
    key = notify.task_queue_key(namespace.id, 1, task_queue)
    assert notify.hub.known_empty(key, clock.now()) is None
    assert isinstance(_poll(namespace, task_queue), workflow_tasks.StartedWorkflowTask)

    with CaptureQueriesContext(connection) as captured:
        answer = _poll(namespace, task_queue)
    assert captured.captured_queries == []
    _from_memory(answer)

    # A new task's wake-up (published when its start commits) sends the next poll to the database.
    _start(namespace, task_queue)
    with CaptureQueriesContext(connection) as captured:
        assert isinstance(_poll(namespace, task_queue), workflow_tasks.StartedWorkflowTask)
    assert captured.captured_queries


def test_a_lost_wake_up_hides_a_task_for_at_most_empty_for(monkeypatch):
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    task_queue = f"tq-{uuid.uuid4()}"
    monkeypatch.setattr(notify, "EMPTY_FOR", timedelta(milliseconds=300))
    assert _poll(namespace, task_queue) == queue.NotYet(None)  # read: the queue is empty

    with monkeypatch.context() as lost:
        lost.setattr(notify, "publish_on_commit", lambda keys: None)
        lost.setattr(notify, "publish_here_on_commit", lambda keys: None)  # its NOTIFY rode a write
        _start(namespace, task_queue)
    _from_memory(_poll(namespace, task_queue))  # the wake-up never came
    time.sleep(0.3)
    assert isinstance(_poll(namespace, task_queue), workflow_tasks.StartedWorkflowTask)


def test_another_queue_is_not_answered_from_memory():
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    task_queue = f"tq-{uuid.uuid4()}"
    assert _poll(namespace, task_queue) == queue.NotYet(None)
    with CaptureQueriesContext(connection) as captured:
        assert _poll(namespace, f"{task_queue}-other") == queue.NotYet(None)
    assert captured.captured_queries


class _Deadline:
    """The one thing a long poll asks of its gRPC context: how long its caller still waits."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    def time_remaining(self) -> float:
        return self._seconds


def _long_poll_hops(monkeypatch, namespace, task_queue: str, group: str) -> int:
    """How many times a long poll of 1.3 s (its answer: nothing) hands its claim to a database thread."""
    hops = []
    real = dbthreads.run

    async def counted(fn, *args, **kwargs):
        hops.append(fn)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(dbthreads, "run", counted)
    answer = asyncio.run(
        waits.long_poll(
            _Deadline(1.3), namespace, 1, task_queue, lambda: _poll(namespace, task_queue), group=group
        )
    )
    monkeypatch.setattr(dbthreads, "run", real)
    assert answer is None
    return len(hops)


def test_a_long_poll_of_a_queue_known_empty_asks_no_database_thread(monkeypatch):
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    task_queue = f"tq-{uuid.uuid4()}"
    monkeypatch.setattr(notify, "EMPTY_FOR", timedelta(seconds=5))
    assert _poll(namespace, task_queue) == queue.NotYet(None)  # read: empty, and no deployments
    assert _long_poll_hops(monkeypatch, namespace, task_queue, group="") == 0
    # A versioned poller's claim routes: it reads the queue.
    assert _long_poll_hops(monkeypatch, namespace, task_queue, group="deployment\x1fbuild") >= 1
