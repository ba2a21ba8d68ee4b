"""Failure isolation of the shard queues: a row whose processing raises backs off, then is parked, and
never holds up the rows behind it (engine/shards/parking.py). Real Postgres, the real shard code."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from perdura import clock
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.history.mutation import TimerKind, TransferKind
from engine.models import Execution, ShardLease, Timer, Transfer
from engine.models import Schedule as ScheduleRow
from engine.persistence import leases
from engine.services import workflows
from engine.shards import parking, schedules, timers, transfers
from tenants.services.namespaces import namespace_register
from tests.integration.test_schedule_shards import due_schedule, started_runs
from tests.integration.test_shard_fencing import fired_events, run_with_due_timer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def three_attempts(settings):
    settings.PERDURA_SHARD_MAX_ATTEMPTS = 3


def started_run(*, shard: int | None = None) -> Execution:
    """A run (no worker: its first workflow task just waits), optionally moved to `shard`."""
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name=f"tq-{uuid.uuid4()}"),
    )
    result = workflows.workflow_start(namespace=namespace, request=request)
    execution = Execution.objects.get(namespace=namespace, run_id=result.run_id)
    if shard is not None:
        Execution.objects.filter(pk=execution.pk).update(shard=shard)
        execution.shard = shard
    return execution


def corrupt(execution: Execution) -> bytes:
    """Replace the run's sealed state by bytes that do not decrypt; returns the original."""
    original = bytes(Execution.objects.get(pk=execution.pk).state)
    Execution.objects.filter(pk=execution.pk).update(state=b"not a sealed state")
    return original


def make_due(model, pk: int, field: str) -> None:
    """Skip the backoff wait: the row's next attempt is now."""
    model.objects.filter(pk=pk).update(**{field: clock.now() - timedelta(milliseconds=1)})


def test_a_failing_timer_backs_off_is_parked_and_the_timers_behind_it_fire():
    good = run_with_due_timer()
    bad = started_run(shard=good.shard)
    original = corrupt(bad)
    poison = Timer.objects.create(
        shard=good.shard,
        fire_at=clock.now() - timedelta(seconds=10),  # ahead of the good timer in the due order
        execution=bad,
        kind=TimerKind.USER_TIMER,
        event_id=5,
    )
    before = clock.now()
    timers.process_shard(good.shard, "w")
    assert fired_events(good) == 1
    poison.refresh_from_db()
    assert poison.failures == 1
    assert poison.parked_at is None
    assert poison.last_error == "ValueError: unknown ciphertext format"
    assert before + timedelta(seconds=1) <= poison.fire_at <= clock.now() + timedelta(seconds=1)

    for attempt in (2, 3):
        make_due(Timer, poison.pk, "fire_at")
        timers.process_shard(good.shard, "w")
        poison.refresh_from_db()
        assert poison.failures == attempt
    assert poison.parked_at is not None
    assert parking.parked_counts() == {
        "timer": 1,
        "transfer": 0,
        "visibility": 0,
        "schedule": 0,
        "retention": 0,
        "batch": 0,
        "reencryption": 0,
    }
    (row,) = parking.parked_list(namespace=bad.namespace.name)
    assert (row.id, row.queue, row.kind, row.attempts) == (f"timer:{poison.pk}", "timer", "USER_TIMER", 3)
    assert (row.workflow_id, row.run_id, row.shard) == (bad.workflow_id, bad.run_id, good.shard)
    assert row.last_error == "ValueError: unknown ciphertext format"
    assert parking.parked_list(namespace="another") == []

    # Parked: out of every due query, however old its fire time.
    make_due(Timer, poison.pk, "fire_at")
    assert good.shard not in timers.due_shards()
    timers.process_shard(good.shard, "w")
    poison.refresh_from_db()
    assert poison.failures == 3

    # The operator fixes the run and redrives the row: it is due at once, attempts reset, and fires.
    Execution.objects.filter(pk=bad.pk).update(state=original)
    assert parking.parked_redrive(ids=[f"timer:{poison.pk}"]) == 1
    poison.refresh_from_db()
    assert (poison.failures, poison.parked_at, poison.last_error) == (0, None, "")
    assert good.shard in timers.due_shards()
    timers.process_shard(good.shard, "w")
    assert not Timer.objects.filter(pk=poison.pk).exists()
    assert parking.parked_counts()["timer"] == 0


def test_an_unknown_timer_kind_is_parked_not_dropped(settings):
    """A kind this process cannot fire (a newer version's, or a corrupt row) is kept for the operator;
    before, it was deleted as a no-op."""
    settings.PERDURA_SHARD_MAX_ATTEMPTS = 1
    run = started_run()
    row = Timer.objects.create(shard=run.shard, fire_at=clock.now(), execution=run, kind=99, event_id=1)
    timers.process_shard(run.shard, "w")
    row.refresh_from_db()
    assert row.parked_at is not None
    assert row.last_error == "UnknownTimerKind: unknown timer kind 99"
    assert [r.kind for r in parking.parked_list()] == ["UNKNOWN(99)"]


def _signal_transfer(run: Execution, event_id: int) -> Transfer:
    return Transfer(
        shard=run.shard,
        execution=run,
        kind=TransferKind.SIGNAL_EXTERNAL,
        event_id=event_id,
        details=b"cannot be unsealed",
        created_at=clock.now(),
    )


def test_a_full_batch_of_failing_transfers_does_not_spin_and_the_rows_behind_go_on():
    """The reported case: more failing transfers than a batch (100) made `process` re-read the same
    rows forever. Now each failing row is tried once per pass and backs off; the good row behind them
    is done in the same pass."""
    run = started_run()
    Transfer.objects.bulk_create([_signal_transfer(run, i) for i in range(150)])
    good = Transfer.objects.create(
        shard=run.shard,
        execution=run,
        kind=TransferKind.SCHEDULE_RUN_CLOSED,
        event_id=1000,
        details=b"",
        created_at=clock.now(),
    )
    range_id = leases.acquire(run.shard, "w")
    result: list[int] = []

    def work() -> None:
        try:
            result.append(transfers.process(run.shard, range_id))
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    before = clock.now()
    started = time.monotonic()
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "transfer processing did not return: it spins on the failing rows"
    print(f"\n150 failing transfers + 1 good: one pass in {time.monotonic() - started:.2f} s")
    assert result == [1]
    assert not Transfer.objects.filter(pk=good.pk).exists()
    bad = Transfer.objects.filter(execution=run, kind=TransferKind.SIGNAL_EXTERNAL)
    assert bad.count() == 150
    assert set(bad.values_list("failures", flat=True)) == {1}
    assert bad.filter(retry_at__gte=before + timedelta(seconds=1)).count() == 150
    # Until their retry time nothing is due: the next pass is idle (the wait pushed out, so that the
    # check does not depend on how fast this machine ran the pass).
    bad.update(retry_at=clock.now() + timedelta(minutes=1))
    assert run.shard not in transfers.shards_with_transfers(clock.now())
    assert transfers.process(run.shard, range_id) == 0
    assert set(bad.values_list("failures", flat=True)) == {1}

    for _ in range(2):
        bad.update(retry_at=clock.now() - timedelta(milliseconds=1))
        transfers.process(run.shard, range_id)
    assert bad.filter(parked_at__isnull=False, retry_at__isnull=True, failures=3).count() == 150
    assert parking.parked_counts()["transfer"] == 150
    kinds = {r.kind for r in parking.parked_list(namespace=run.namespace.name)}
    assert kinds == {"SIGNAL_EXTERNAL"}
    assert parking.parked_redrive() == 150
    assert bad.filter(parked_at__isnull=True, retry_at__isnull=True, failures=0).count() == 150


def test_a_failing_schedule_backs_off_and_the_schedules_behind_it_tick():
    good = due_schedule()
    bad = due_schedule()
    ScheduleRow.objects.filter(pk=bad.pk).update(
        shard=good.shard, data=b"corrupt", next_wakeup_at=good.next_wakeup_at - timedelta(seconds=5)
    )
    range_id = leases.acquire(good.shard, "w")
    assert schedules.process_due(good.shard, range_id) == 1
    assert started_runs(good) == 1
    bad.refresh_from_db()
    assert bad.failures == 1
    assert bad.next_wakeup_at > clock.now()
    for _ in range(2):
        make_due(ScheduleRow, bad.pk, "next_wakeup_at")
        schedules.process_due(good.shard, range_id)
    bad.refresh_from_db()
    assert (bad.failures, bad.parked_at is not None) == (3, True)
    # A run of the schedule closing does not bring a parked schedule back; only a redrive does.
    schedules.schedule_wake(namespace_id=bad.namespace_id, schedule_id=bad.schedule_id)
    assert good.shard not in schedules.due_shards(clock.now())
    (row,) = parking.parked_list(namespace=bad.namespace.name)
    assert (row.id, row.workflow_id, row.kind) == (f"schedule:{bad.pk}", bad.schedule_id, "SCHEDULE_TICK")
    assert parking.parked_redrive(ids=[row.id]) == 1
    assert good.shard in schedules.due_shards(clock.now())


def test_a_lost_lease_is_not_charged_to_the_row():
    """LeaseLost stops the pass; the row is left as it was for the shard's new owner."""
    run = started_run()
    row = Timer.objects.create(shard=run.shard, fire_at=clock.now(), execution=run, kind=99, event_id=1)
    old = leases.acquire(run.shard, "worker-a")
    ShardLease.objects.filter(shard=run.shard).update(expires_at=clock.now() - timedelta(seconds=1))
    leases.acquire(run.shard, "worker-b")
    with pytest.raises(leases.LeaseLost):
        parking.row_failed(
            queue=parking.TIMER, pk=row.pk, shard=run.shard, range_id=old, error=ValueError("x")
        )
    row.refresh_from_db()
    assert (row.failures, row.parked_at) == (0, None)


def test_an_error_of_the_database_that_answers_is_the_rows_fault():
    """Only a database that does not answer is an outage (the pass stops, nothing is charged)."""
    from django.db import OperationalError

    assert not parking.is_outage(ValueError("x"))
    assert not parking.is_outage(OperationalError("canceling statement due to statement timeout"))


@pytest.mark.parametrize(
    ("query", "index"),
    [
        (
            lambda now: Timer.objects.filter(shard=3, parked_at__isnull=True, fire_at__lte=now),
            "timer_live_due",
        ),
        (
            lambda now: Transfer.objects.filter(
                shard=3, parked_at__isnull=True, retry_at__isnull=True
            ).order_by("id"),
            "transfer_fresh",
        ),
        (
            lambda now: Transfer.objects.filter(shard=3, parked_at__isnull=True, retry_at__lte=now),
            "transfer_retry",
        ),
        (
            lambda now: ScheduleRow.objects.filter(shard=3, parked_at__isnull=True, next_wakeup_at__lte=now),
            "schedule_live_due",
        ),
        (lambda now: Timer.objects.filter(parked_at__isnull=False), "timer_parked"),
    ],
)
def test_due_queries_use_the_partial_indexes(query, index):
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            plan = query(clock.now()).explain()
        finally:
            cursor.execute("SET enable_seqscan = on")
    assert index in plan
