"""Engine tables: runs, their encrypted history, task queues, timers and shard leases (DESIGN.md data model)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from tenants.models import Namespace

_LIVE = Q(parked_at__isnull=True)
_PARKED = Q(parked_at__isnull=False)


class ShardQueueRow(models.Model):
    """What every shard queue row carries about its failed processing attempts (engine/shards/parking.py).

    A row whose processing raises is tried again later (its due time moves by an exponential backoff)
    and, after PERDURA_SHARD_MAX_ATTEMPTS, parked: kept with its last error, out of every due query
    (their indexes are partial on `parked_at IS NULL`), until `perdura shards redrive` makes it due again.
    """

    failures = models.IntegerField(default=0, db_default=0)
    """Processing attempts that raised since the row was created or last redriven (0: never failed)."""
    last_error = models.TextField(default="", db_default="")
    """The last failure as `ExceptionType: message`, truncated."""
    parked_at = models.DateTimeField(null=True)
    """When the row was parked; null while it is live."""

    class Meta:
        abstract = True

    # Database defaults too: rows are also inserted by raw SQL (engine/persistence/store.py).


class Execution(models.Model):
    """One run. Plaintext columns are what is indexed; the mutable state document is encrypted."""

    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, db_index=False)
    workflow_id = models.CharField(max_length=1000)
    run_id = models.CharField(max_length=64)
    shard = models.SmallIntegerField()
    workflow_type = models.CharField(max_length=1000)
    task_queue = models.CharField(max_length=1000)
    # temporal.api.enums.v1.WorkflowExecutionStatus
    status = models.SmallIntegerField()
    start_time = models.DateTimeField()
    execution_time = models.DateTimeField()
    close_time = models.DateTimeField(null=True)
    next_event_id = models.BigIntegerField()
    # Compare-and-swap guard: every write checks and bumps it (DESIGN.md rule 2).
    db_version = models.BigIntegerField(default=1)
    state = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "workflow_id", "run_id"], name="execution_unique_run"
            )
        ]
        indexes = [models.Index(fields=["namespace", "workflow_id", "-start_time"], name="execution_by_wid")]


class CurrentRun(models.Model):
    """The newest run of each workflow id: the row that serialises starts and id reuse decisions."""

    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, db_index=False)
    workflow_id = models.CharField(max_length=1000)
    run_id = models.CharField(max_length=64)
    start_request_id = models.CharField(max_length=255, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "workflow_id"], name="current_run_unique")
        ]


class HistoryBatch(models.Model):
    """The events one transaction appended to a run, as an encrypted `temporal.api.history.v1.History`."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, db_index=False)
    first_event_id = models.BigIntegerField()
    last_event_id = models.BigIntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["execution", "first_event_id"], name="history_unique_batch")
        ]


class Task(models.Model):
    """A workflow or activity task waiting in a task queue for a poller (derived from history, rule 3)."""

    class Kind(models.IntegerChoices):
        WORKFLOW = 1
        ACTIVITY = 2
        QUERY = 3

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    task_queue = models.CharField(max_length=1000)
    kind = models.SmallIntegerField(choices=Kind.choices)
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE)
    scheduled_event_id = models.BigIntegerField()
    attempt = models.IntegerField(default=1)
    visible_at = models.DateTimeField()
    query = models.ForeignKey("Query", null=True, on_delete=models.CASCADE, related_name="+")

    class Meta:
        indexes = [
            models.Index(fields=["namespace", "kind", "task_queue", "visible_at", "id"], name="task_claim"),
        ]


class Timer(ShardQueueRow):
    """A durable timer: the truth about what must happen when (rule 3). Wake-ups only hint at it."""

    class Kind(models.IntegerChoices):
        USER_TIMER = 1
        WORKFLOW_TASK_TIMEOUT = 2
        ACTIVITY_TIMEOUT = 3
        WORKFLOW_RUN_TIMEOUT = 4
        WORKFLOW_BACKOFF = 5

    shard = models.SmallIntegerField()
    fire_at = models.DateTimeField()
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE)
    kind = models.SmallIntegerField(choices=Kind.choices)
    # What the timer refers to: an event id (timer started, activity/workflow task scheduled) and attempt,
    # plus a sub-kind (the activity timeout type). A fire that no longer matches the run's state is a no-op.
    event_id = models.BigIntegerField(default=0)
    attempt = models.IntegerField(default=0)
    detail = models.SmallIntegerField(default=0)

    class Meta:
        indexes = [
            # A failing timer's fire_at moves to its next attempt; a parked one leaves this index.
            models.Index(fields=["shard", "fire_at"], name="timer_live_due", condition=_LIVE),
            models.Index(fields=["parked_at"], name="timer_parked", condition=_PARKED),
        ]


class ShardLease(models.Model):
    """Ownership of a shard's background work. `range_id` fences: a write checks it is still ours (rule 4)."""

    shard = models.SmallIntegerField(primary_key=True)
    owner = models.CharField(max_length=255, default="")
    range_id = models.BigIntegerField(default=0)
    expires_at = models.DateTimeField(null=True)


class Query(models.Model):
    """A query in flight: the request waits here for a worker's answer. Queries never touch history."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE)
    request = models.BinaryField()
    """The WorkflowQuery, encrypted under the namespace's data key."""
    answer = models.BinaryField(null=True)
    """The worker's RespondQueryTaskCompletedRequest, encrypted; null until answered."""
    created_at = models.DateTimeField()


class Transfer(ShardQueueRow):
    """Work a run owes another run (start a child, report to a parent, signal, cancel), done after commit.

    Created in the same transaction as the events that imply it (rule 3) and deleted in the transaction
    that records its outcome; every step is idempotent, so a crash in between only repeats work.
    """

    shard = models.SmallIntegerField()
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE)
    kind = models.SmallIntegerField()
    event_id = models.BigIntegerField()
    details = models.BinaryField()
    created_at = models.DateTimeField()
    retry_at = models.DateTimeField(null=True)
    """Null: due now, in id order. Set: the row failed and waits until then (engine/shards/parking.py)."""

    class Meta:
        indexes = [
            # Fresh rows in creation order; rows backing off by their retry time; parked rows in neither.
            models.Index(
                fields=["shard", "id"], name="transfer_fresh", condition=_LIVE & Q(retry_at__isnull=True)
            ),
            models.Index(
                fields=["shard", "retry_at"],
                name="transfer_retry",
                condition=_LIVE & Q(retry_at__isnull=False),
            ),
            models.Index(fields=["parked_at"], name="transfer_parked", condition=_PARKED),
        ]


class Schedule(ShardQueueRow):
    """A schedule: its spec, action, policies and scheduler state, sealed as one document.

    `next_wakeup_at` is what the shard loop scans (rule 3): when it passes, the schedule's shard owner
    takes the actions due. Runs the schedule started wake it early when they close (a transfer).
    """

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    schedule_id = models.CharField(max_length=1000)
    shard = models.SmallIntegerField()
    next_wakeup_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField()
    data = models.BinaryField()
    """The scheduler's record (engine.schedules.rules), encrypted: the action carries payloads."""
    memo = models.BinaryField(default=b"")
    """The schedule's own memo (a serialized Memo), encrypted."""
    search_attributes = models.BinaryField(default=b"")
    """The schedule's own search attributes (a serialized SearchAttributes), plaintext like a run's."""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "schedule_id"], name="schedule_unique_id")
        ]
        indexes = [
            # A tick that fails moves next_wakeup_at to its next attempt; a parked schedule leaves this index.
            models.Index(fields=["shard", "next_wakeup_at"], name="schedule_live_due", condition=_LIVE),
            models.Index(fields=["parked_at"], name="schedule_parked", condition=_PARKED),
        ]


class Reencryption(models.Model):
    """A namespace's move of its old ciphertexts to its current data key (engine/persistence/reencrypt.py).

    The cursors make it resumable: runs by row id, then schedules by row id."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    target_version = models.PositiveIntegerField()
    """Rows sealed under an older version are moved; newer writes are sealed under it or later already."""
    runs_after = models.BigIntegerField(default=0)
    schedules_after = models.BigIntegerField(default=0)
    runs_total = models.BigIntegerField(default=0)
    runs_done = models.BigIntegerField(default=0)
    rewritten = models.BigIntegerField(default=0)
    """Ciphertexts sealed again (states, history batches, transfers, memos, schedules)."""
    started_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace"], condition=Q(finished_at__isnull=True), name="reencryption_one_running"
            )
        ]
