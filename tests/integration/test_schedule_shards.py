"""Schedule ticks are shard work: fenced by the lease, and racing workers take each action once."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from perdura import clock
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.schedule.v1 import IntervalSpec, Schedule, ScheduleAction, SchedulePatch, ScheduleSpec
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflow.v1 import NewWorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import CreateScheduleRequest

from engine.models import Execution, ShardLease
from engine.models import Schedule as ScheduleRow
from engine.persistence import leases
from engine.services import schedules
from engine.shards import schedules as shard_schedules
from engine.shards import timers
from tenants.services.namespaces import namespace_register

pytestmark = pytest.mark.django_db(transaction=True)


def due_schedule() -> ScheduleRow:
    """A schedule (every hour, allow-all) whose wake-up time has just passed."""
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    schedule = Schedule(
        spec=ScheduleSpec(interval=[IntervalSpec(interval={"seconds": 3600})]),
        action=ScheduleAction(
            start_workflow=NewWorkflowExecutionInfo(
                workflow_id=f"wf-{uuid.uuid4()}",
                workflow_type=WorkflowType(name="T"),
                task_queue=TaskQueue(name="q"),
            )
        ),
    )
    schedule.policies.overlap_policy = 6  # allow all
    schedules.schedule_create(
        namespace=namespace,
        request=CreateScheduleRequest(
            namespace=namespace.name, schedule_id=f"s-{uuid.uuid4()}", schedule=schedule, request_id="r"
        ),
    )
    row = ScheduleRow.objects.get(namespace=namespace)
    # Pretend the last look was an hour and a bit ago: one action is due now.
    record = schedules.open_record(row)
    record.last_processed = clock.now() - timedelta(seconds=3601)
    schedules._seal(row, record)
    row.next_wakeup_at = clock.now() - timedelta(seconds=1)
    row.save()
    return row


def started_runs(row: ScheduleRow) -> int:
    return Execution.objects.filter(namespace_id=row.namespace_id).count()


def test_a_worker_whose_lease_was_taken_cannot_tick():
    row = due_schedule()
    old = leases.acquire(row.shard, "worker-a")
    ShardLease.objects.filter(shard=row.shard).update(expires_at=clock.now() - timedelta(seconds=1))
    new = leases.acquire(row.shard, "worker-b")
    with pytest.raises(leases.LeaseLost):
        shard_schedules.process_due(row.shard, old)
    assert started_runs(row) == 0
    assert shard_schedules.process_due(row.shard, new) == 1
    assert started_runs(row) == 1
    row.refresh_from_db()
    assert row.next_wakeup_at > clock.now()


def test_racing_workers_take_each_action_once():
    row = due_schedule()
    results: list[int] = []
    barrier = threading.Barrier(4)

    def race(name: str) -> None:
        barrier.wait()
        try:
            results.append(timers.process_shard(row.shard, name) or 0)
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(results) == 1
    assert started_runs(row) == 1


def test_patch_on_a_missing_schedule_is_not_found():
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    from temporalio.api.workflowservice.v1 import PatchScheduleRequest

    from engine.errors import NotFound

    with pytest.raises(NotFound, match="workflow not found for ID: temporal-sys-scheduler:nope"):
        schedules.schedule_patch(
            namespace=namespace,
            request=PatchScheduleRequest(schedule_id="nope", patch=SchedulePatch(pause="x"), request_id="r"),
        )
