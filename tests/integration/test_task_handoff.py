"""A task made while a poll of this process waits on its queue is started for that poll in the transaction
that makes it (engine/services/task_handoff.py): no task row, no claim, the same history; a transaction
that does not commit hands nothing, and the poll waits on."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.enums.v1 import EventType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine import dbthreads, notify
from engine.api.rpc import waits
from engine.history.mutation import TaskKind
from engine.matching import queue
from engine.models import Task
from engine.persistence import store
from engine.services import workflow_tasks, workflows
from tenants.services.namespaces import namespace_register

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _database_calls_on_the_loop(monkeypatch):
    """As in `perdura dev`: a database thread would keep a connection to the test database past the test."""
    monkeypatch.setattr(dbthreads, "_inline", True)
    monkeypatch.setattr(dbthreads, "_pool", None)


class _Deadline:
    """The one thing a long poll asks of its gRPC context: how long its caller still waits."""

    def time_remaining(self) -> float:
        return 10.0


def _start(namespace, task_queue: str) -> str:
    workflow_id = f"wf-{uuid.uuid4()}"
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=workflow_id,
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name=task_queue),
        request_id=str(uuid.uuid4()),
    )
    workflows.workflow_start(namespace=namespace, request=request)
    return workflow_id


def _poll(namespace, task_queue: str, claims: list[object] | None = None):
    """A worker's long poll; `claims` collects what each of its reads of the queue found."""
    request_id = str(uuid.uuid4())

    def claim():
        found = workflow_tasks.poll_once(
            namespace=namespace, task_queue=task_queue, identity="worker", request_id=request_id
        )
        if claims is not None:
            claims.append(found)
        return found

    return waits.long_poll(
        _Deadline(),
        namespace,
        TaskKind.WORKFLOW,
        task_queue,
        claim,
        offer=workflow_tasks.starter(identity="worker", request_id=request_id),
    )


async def _waiting(namespace, task_queue: str) -> None:
    """Until the poll stands ready on its queue (its claim found nothing)."""
    key = notify.task_queue_key(namespace.id, TaskKind.WORKFLOW, task_queue)
    for _ in range(500):
        if any(w.idle and w.offer is not None for w in notify.hub._waiters.get(key, ())):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the poll never waited")


def _events(namespace, workflow_id: str) -> list[int]:
    execution = store.find_execution(namespace.id, workflow_id, "", lock=False)
    return [e.event_type for e in store.history_events(execution)]


def test_a_start_while_a_poll_waits_hands_it_the_first_task_without_a_row():
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    task_queue = f"tq-{uuid.uuid4()}"

    claims: list[object] = []

    async def scenario():
        poll = asyncio.ensure_future(_poll(namespace, task_queue, claims))
        await _waiting(namespace, task_queue)
        workflow_id = await dbthreads.run(_start, namespace, task_queue)
        return workflow_id, await asyncio.wait_for(poll, 5)

    workflow_id, started = asyncio.run(scenario())
    assert isinstance(started, workflow_tasks.StartedWorkflowTask)
    assert claims == [queue.NotYet(None)]  # it read the queue once, empty, and never again
    assert started.execution.workflow_id == workflow_id
    assert (started.scheduled_event_id, started.started_event_id) == (2, 3)
    assert not Task.objects.filter(namespace_id=namespace.id).exists()
    assert _events(namespace, workflow_id) == [
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    ]
    # The start made the task's whole history: the poll answers with it, nothing read after the commit.
    assert started.events == list(store.history_events(started.execution))


def test_a_transaction_that_does_not_commit_hands_nothing_and_the_poll_waits_on(monkeypatch):
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    task_queue = f"tq-{uuid.uuid4()}"
    real = store.write_new

    def written_then_lost(execution, m):
        real(execution, m)
        raise RuntimeError("the connection dropped before the commit")

    async def scenario():
        poll = asyncio.ensure_future(_poll(namespace, task_queue))
        await _waiting(namespace, task_queue)
        monkeypatch.setattr(store, "write_new", written_then_lost)
        with pytest.raises(RuntimeError):
            await dbthreads.run(_start, namespace, task_queue)
        monkeypatch.setattr(store, "write_new", real)
        await asyncio.sleep(0.05)
        assert not poll.done()
        await _waiting(namespace, task_queue)  # released: ready for the next task
        workflow_id = await dbthreads.run(_start, namespace, task_queue)
        return workflow_id, await asyncio.wait_for(poll, 5)

    workflow_id, started = asyncio.run(scenario())
    assert started.execution.workflow_id == workflow_id
    assert Task.objects.filter(namespace_id=namespace.id).count() == 0
    assert store.find_execution(namespace.id, workflow_id, "", lock=False).workflow_id == workflow_id


def test_a_task_made_while_no_poll_waits_is_queued_and_claimed():
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    task_queue = f"tq-{uuid.uuid4()}"
    workflow_id = _start(namespace, task_queue)
    assert Task.objects.filter(namespace_id=namespace.id, task_queue=task_queue).count() == 1
    started = asyncio.run(_poll(namespace, task_queue))
    assert started.execution.workflow_id == workflow_id
    assert started.events is None  # the claim made only the started event: the poll reads the history
    assert not Task.objects.filter(namespace_id=namespace.id).exists()
