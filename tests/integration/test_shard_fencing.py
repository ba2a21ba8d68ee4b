"""Shard leases fence timer processing: a worker whose lease moved on cannot commit (DESIGN.md rule 4)."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from google.protobuf.duration_pb2 import Duration
from perdura import clock
from temporalio.api.command.v1 import Command, StartTimerCommandAttributes
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.enums.v1 import CommandType, EventType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    RespondWorkflowTaskCompletedRequest,
    StartWorkflowExecutionRequest,
)

from engine import tokens
from engine.history.mutation import TimerKind
from engine.models import Execution, ShardLease, Timer, Transfer
from engine.persistence import leases, store
from engine.services import workflow_tasks, workflows
from engine.shards import timers
from tenants.services.namespaces import namespace_register

pytestmark = pytest.mark.django_db(transaction=True)


def run_with_due_timer(timers: int = 1) -> Execution:
    """A run whose workflow started `timers` 1 ms timers (through the same services the gRPC API calls),
    now due."""
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    queue = f"tq-{uuid.uuid4()}"
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name=queue),
    )
    workflows.workflow_start(namespace=namespace, request=request)
    started = workflow_tasks.poll_once(namespace=namespace, task_queue=queue, identity="t", request_id="r")
    assert started is not None
    token = tokens.TaskToken(
        namespace_id=str(namespace.id),
        workflow_id=request.workflow_id,
        run_id=started.execution.run_id,
        scheduled_event_id=started.scheduled_event_id,
        attempt=started.attempt,
        started_event_id=started.started_event_id,
    )
    commands = [
        Command(
            command_type=CommandType.COMMAND_TYPE_START_TIMER,
            start_timer_command_attributes=StartTimerCommandAttributes(
                timer_id=f"t{i + 1}", start_to_fire_timeout=Duration(nanos=1_000_000)
            ),
        )
        for i in range(timers)
    ]
    workflow_tasks.workflow_task_complete(
        namespace=namespace, token=token, request=RespondWorkflowTaskCompletedRequest(commands=commands)
    )
    # The row fires no sooner than a second after the timer started (Temporal's timer queue shift):
    # bring it forward rather than wait.
    Timer.objects.filter(execution_id=started.execution.pk, kind=TimerKind.USER_TIMER).update(
        fire_at=clock.now() - timedelta(milliseconds=1)
    )
    return Execution.objects.get(pk=started.execution.pk)


def fired_events(execution: Execution) -> int:
    execution.refresh_from_db()
    return sum(e.event_type == EventType.EVENT_TYPE_TIMER_FIRED for e in store.history_events(execution))


def test_a_worker_whose_lease_was_taken_cannot_commit():
    execution = run_with_due_timer()
    (row,) = Timer.objects.filter(execution=execution, kind=1)
    old = leases.acquire(execution.shard, "worker-a")
    # worker-a stalls past its lease; worker-b takes the shard over.
    ShardLease.objects.filter(shard=execution.shard).update(expires_at=clock.now() - timedelta(seconds=1))
    new = leases.acquire(execution.shard, "worker-b")
    assert new == old + 1
    with pytest.raises(leases.LeaseLost):
        timers.fire(row, shard=execution.shard, range_id=old)
    assert fired_events(execution) == 0
    assert Timer.objects.filter(pk=row.pk).exists()
    assert timers.fire(row, shard=execution.shard, range_id=new)
    assert fired_events(execution) == 1


def test_live_lease_is_not_stolen():
    execution = run_with_due_timer()
    assert leases.acquire(execution.shard, "worker-a") is not None
    assert leases.acquire(execution.shard, "worker-b") is None
    assert timers.process_shard(execution.shard, "worker-b") is None
    assert fired_events(execution) == 0


def test_racing_workers_fire_a_timer_exactly_once():
    execution = run_with_due_timer()
    results: list[int] = []
    barrier = threading.Barrier(4)

    def race(name: str) -> None:
        barrier.wait()
        try:
            results.append(timers.process_shard(execution.shard, name) or 0)
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == 1
    assert fired_events(execution) == 1


def test_a_timer_coming_due_during_a_pass_fires_before_the_lease_goes(monkeypatch):
    """A hint that finds the lease taken is dropped (process_shard answers None); the holder must look
    for work that came due during its pass before it lets go, or that timer waits for the sweep."""
    execution = run_with_due_timer()
    row = Timer.objects.get(execution=execution)
    Timer.objects.filter(pk=row.pk).update(fire_at=clock.now() + timedelta(hours=1))
    # The pass has a transfer to process, and the timer comes due while it does.
    Transfer.objects.create(
        shard=execution.shard, execution=execution, kind=999, event_id=1, details=b"", created_at=clock.now()
    )

    def transfer_slice(shard, range_id, *, budget):
        Transfer.objects.filter(execution=execution, kind=999).delete()
        Timer.objects.filter(pk=row.pk).update(fire_at=clock.now())
        return 1

    monkeypatch.setattr(timers, "_SLICED", (timers._Queue("transfers", transfer_slice), *timers._SLICED[1:]))
    assert timers.process_shard(execution.shard, "holder") == 2
    assert fired_events(execution) == 1
