"""Batch operations on the shard side (engine/shards/batches.py): a failing batch backs off, is parked
and redriven; a worker that lost the shard's lease commits no action; the pace holds. Real Postgres,
the real shard code, no worker process."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from perdura import clock
from temporalio.api.batch.v1 import BatchOperationReset, BatchOperationSignal
from temporalio.api.common.v1 import WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import BatchOperationState, EventType, ResetType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartBatchOperationRequest, StartWorkflowExecutionRequest

from engine.models import BatchOperation, BatchTarget, Execution, Reencryption, ShardLease
from engine.persistence import leases, reencrypt, store
from engine.services import batches as batch_service
from engine.services import workflows
from engine.shards import batches, parking, timers
from tenants import datakeys
from tests.integration.test_shard_parking import corrupt, make_due, started_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def three_attempts(settings):
    settings.PERDURA_SHARD_MAX_ATTEMPTS = 3


def signals(execution: Execution) -> int:
    execution.refresh_from_db()
    kind = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    return sum(e.event_type == kind for e in store.history_events(execution))


def _another_run(first: Execution) -> Execution:
    """One more run in `first`'s namespace."""
    request = StartWorkflowExecutionRequest(
        namespace=first.namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name="tq"),
    )
    result = workflows.workflow_start(namespace=first.namespace, request=request)
    return Execution.objects.get(namespace=first.namespace, run_id=result.run_id)


def start(runs: list[Execution], *, rps: float = 0) -> BatchOperation:
    return batch_service.batch_start(
        namespace=runs[0].namespace,
        request=StartBatchOperationRequest(
            namespace=runs[0].namespace.name,
            job_id="job",
            reason="test",
            executions=[WorkflowExecution(workflow_id=r.workflow_id, run_id=r.run_id) for r in runs],
            max_operations_per_second=rps,
            signal_operation=BatchOperationSignal(signal="poke"),
        ),
    )


def test_a_failing_batch_backs_off_is_parked_and_a_redrive_finishes_it():
    run = started_run()
    original = corrupt(run)
    batch = start([run])
    range_id = leases.acquire(batch.shard, "w")
    assert batches.process_due(batch.shard, range_id) == 0
    batch.refresh_from_db()
    assert (batch.failures, batch.completed, batch.state) == (
        1,
        0,
        BatchOperationState.BATCH_OPERATION_STATE_RUNNING,
    )
    assert batch.last_error.startswith("ValueError")
    assert batch.next_wakeup_at > clock.now()
    for _ in range(2):
        make_due(BatchOperation, batch.pk, "next_wakeup_at")
        batches.process_due(batch.shard, range_id)
    batch.refresh_from_db()
    assert (batch.failures, batch.parked_at is not None) == (3, True)
    assert batch.shard not in batches.due_shards(clock.now())
    (row,) = parking.parked_list(namespace=run.namespace.name)
    assert (row.id, row.queue, row.workflow_id, row.kind) == (
        f"batch:{batch.pk}",
        "batch",
        "job",
        "BATCH_STEP",
    )
    assert parking.parked_counts()["batch"] == 1
    # Nothing of the failed steps was written: the target is still to do, the run has no signal.
    assert BatchTarget.objects.get(batch=batch).outcome == BatchTarget.PENDING
    Execution.objects.filter(pk=run.pk).update(state=original)
    assert signals(run) == 0
    assert parking.parked_redrive(ids=[row.id]) == 1
    assert batches.process_due(batch.shard, range_id) == 1
    batch.refresh_from_db()
    assert (batch.state, batch.completed, batch.failures, batch.next_wakeup_at) == (
        BatchOperationState.BATCH_OPERATION_STATE_COMPLETED,
        1,
        0,
        None,
    )
    assert signals(run) == 1


def test_a_worker_that_lost_the_lease_commits_no_action():
    run = started_run()
    batch = start([run])
    old = leases.acquire(batch.shard, "worker-a")
    ShardLease.objects.filter(shard=batch.shard).update(expires_at=clock.now() - timedelta(seconds=1))
    leases.acquire(batch.shard, "worker-b")
    with pytest.raises(leases.LeaseLost):
        batches.process_due(batch.shard, old)
    assert signals(run) == 0
    assert BatchTarget.objects.get(batch=batch).outcome == BatchTarget.PENDING
    batch.refresh_from_db()
    assert (batch.completed, batch.failures) == (0, 0)


def test_the_pace_spaces_the_actions_and_a_stopped_batch_takes_none():
    first = started_run()
    runs = [first, *(_another_run(first) for _ in range(2))]
    batch = start(runs, rps=2)
    range_id = leases.acquire(batch.shard, "w")
    assert batches.process_due(batch.shard, range_id) == 1  # the next one is half a second away
    batch.refresh_from_db()
    assert batch.completed == 1
    assert batch.next_wakeup_at >= batch.paced_until > clock.now()
    assert batches.process_due(batch.shard, range_id) == 0
    make_due(BatchOperation, batch.pk, "next_wakeup_at")
    BatchOperation.objects.filter(pk=batch.pk).update(paced_until=clock.now())
    assert batches.process_due(batch.shard, range_id) == 1
    batch_service.batch_stop(namespace=runs[0].namespace, job_id="job", reason="enough", identity="me")
    BatchOperation.objects.filter(pk=batch.pk).update(paced_until=clock.now(), next_wakeup_at=clock.now())
    assert batches.process_due(batch.shard, range_id) == 0
    batch.refresh_from_db()
    assert (batch.completed, batch.state, batch.next_wakeup_at) == (
        2,
        BatchOperationState.BATCH_OPERATION_STATE_FAILED,
        None,
    )
    assert [signals(r) for r in runs] == [1, 1, 0]


def test_a_run_the_action_refuses_fails_alone_and_the_batch_goes_on(settings):
    """A reset of a run with no completed workflow task is refused: that target fails with the reason,
    the batch is not charged, and a run that does not exist counts as done (as in Temporal)."""
    settings.PERDURA_BATCH_RPS = 10_000.0  # both targets in one pass
    run = started_run()
    batch = batch_service.batch_start(
        namespace=run.namespace,
        request=StartBatchOperationRequest(
            namespace=run.namespace.name,
            job_id="resets",
            reason="test",
            executions=[
                WorkflowExecution(workflow_id=run.workflow_id),
                WorkflowExecution(workflow_id="gone"),
            ],
            reset_operation=BatchOperationReset(reset_type=ResetType.RESET_TYPE_LAST_WORKFLOW_TASK),
        ),
    )
    range_id = leases.acquire(batch.shard, "w")
    assert batches.process_due(batch.shard, range_id) == 2
    batch.refresh_from_db()
    assert (batch.state, batch.completed, batch.failed, batch.failures) == (
        BatchOperationState.BATCH_OPERATION_STATE_COMPLETED,
        1,
        1,
        0,
    )
    failed = BatchTarget.objects.get(batch=batch, outcome=BatchTarget.FAILED)
    assert (failed.workflow_id, failed.error) == (
        run.workflow_id,
        "The run has no completed workflow task to reset to.",
    )


def test_key_rotation_moves_a_batch_s_sealed_operation():
    """The operation (signal input) is sealed under the namespace's key; the re-encryption moves it."""
    run = started_run()
    batch = start([run])
    assert reencrypt.sealed_version(BatchOperation.objects.get(pk=batch.pk).operation) == 1
    datakeys.datakey_create(namespace=run.namespace)
    assert reencrypt.stale_count(run.namespace.id) > 0
    job = reencrypt.start(run.namespace.id)
    Reencryption.objects.filter(pk=job.pk).update(next_wakeup_at=clock.now())  # past its start delay
    timers.process_shard(job.shard, "test")
    job.refresh_from_db()
    assert job.finished_at is not None
    batch.refresh_from_db()
    assert reencrypt.sealed_version(batch.operation) == 2
    assert reencrypt.stale_count(run.namespace.id) == 0
    assert batch_service.operation_of(batch).signal_operation.signal == "poke"
