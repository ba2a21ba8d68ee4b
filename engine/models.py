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
    # Up from the first query parked on the run until none is (changed under the run's lock): the run's
    # workflow tasks look for parked queries only then (engine/persistence/query_rows.py).
    queries_parked = models.BooleanField(default=False, db_default=False)

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
    passed_at = models.DateTimeField(null=True)
    """When the latest pass over the shard began (its lease taken): a wake-up sent before then is spent."""


class ShardOwner(models.Model):
    """A shard loop that is alive (engine/shards/ownership.py): each takes its share of the shards' leases,
    the shard count over the number of loops seen within a lease's time."""

    name = models.CharField(max_length=255, primary_key=True)
    seen_at = models.DateTimeField()


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


class Retention(ShardQueueRow):
    """A closed run's retention timer: when `due_at` passes, the shard's owner deletes the run.

    Created in the transaction that closes the run (engine/persistence/store.py), due at the close
    time plus the namespace's retention then. The deletion goes in fenced, bounded steps (the
    visibility record and document, history, tasks, queries, timers, transfers, then the run's row
    and this row); `step` is where it stands, saved with each step's last delete, so a crash resumes
    there (engine/shards/retention.py). Nothing scans runs for expiry: only these rows are due.
    """

    shard = models.SmallIntegerField()
    due_at = models.DateTimeField()
    execution = models.OneToOneField(Execution, on_delete=models.CASCADE, related_name="+")
    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False, related_name="+")
    step = models.SmallIntegerField(default=0, db_default=0)
    """engine.history.retention.Step: the first deletion step not finished yet."""

    class Meta:
        indexes = [
            # Probed per shard for its earliest live row (the sweep), then read in due order.
            models.Index(fields=["shard", "due_at"], name="retention_live_due", condition=_LIVE),
            models.Index(fields=["parked_at"], name="retention_parked", condition=_PARKED),
            # A deleted namespace's rows, brought forward in batches (engine/shards/namespace_purge.py).
            models.Index(fields=["namespace", "due_at"], name="retention_by_namespace", condition=_LIVE),
        ]


class Reencryption(ShardQueueRow):
    """A namespace's move of its old ciphertexts to its current data key (engine/persistence/reencrypt.py).

    A shard queue row: the shard that owns it (engine/shards/reencryption.py) moves a batch of runs per
    transaction, fenced on its lease, the cursors and counters committing with the batch, so a worker killed
    mid-job leaves the job to the shard's next owner, neither skipping nor counting a run twice. The
    cursors make it resumable: runs by row id, then schedules by row id. `next_wakeup_at` is when the shard
    loop takes it next (null once finished); a job whose batches keep raising is parked."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    shard = models.SmallIntegerField(default=0)
    next_wakeup_at = models.DateTimeField(null=True)
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
        indexes = [
            models.Index(fields=["shard", "next_wakeup_at"], name="reencryption_live_due", condition=_LIVE),
            models.Index(fields=["parked_at"], name="reencryption_parked", condition=_PARKED),
        ]


class BatchOperation(ShardQueueRow):
    """A batch operation (StartBatchOperation): one action over a snapshot of runs, paced, resumable.

    Its targets are BatchTarget rows written when it starts. The shard that owns the row takes its due
    targets one at a time; each target's action on its run, the target's outcome and these counters commit
    in one transaction fenced on the shard's lease, so a worker killed mid-batch neither skips nor repeats
    a run. `next_wakeup_at` is the due time the shard loop scans (null once the batch has closed); a batch
    whose processing keeps raising is parked like any shard queue row.
    """

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    job_id = models.CharField(max_length=1000)
    shard = models.SmallIntegerField()
    operation_type = models.SmallIntegerField()
    """temporal.api.enums.v1.BatchOperationType."""
    state = models.SmallIntegerField()
    """temporal.api.enums.v1.BatchOperationState: RUNNING, COMPLETED or FAILED (stopped)."""
    reason = models.TextField()
    identity = models.CharField(max_length=1000, default="")
    query = models.TextField(default="")
    """The visibility query the targets were taken from; empty for an explicit list of runs."""
    operation = models.BinaryField()
    """The operation's own message (signal name and input, reset options...), sealed: it carries payloads."""
    rps = models.FloatField()
    """Actions per second at most (PERDURA_BATCH_RPS, or less if the request asked for less)."""
    paced_until = models.DateTimeField()
    """When the next action may run at that rate (a token bucket kept as one time, with a 1 s burst)."""
    next_wakeup_at = models.DateTimeField(null=True)
    total = models.IntegerField(default=0)
    completed = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    start_time = models.DateTimeField()
    close_time = models.DateTimeField(null=True)
    stop_reason = models.TextField(default="")
    stop_identity = models.CharField(max_length=1000, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "job_id"], name="batch_unique_job"),
            # Temporal's frontend.MaxConcurrentBatchOperationPerNamespace, 1 by default, held by the database.
            models.UniqueConstraint(fields=["namespace"], condition=Q(state=1), name="batch_one_running"),
        ]
        indexes = [
            models.Index(fields=["shard", "next_wakeup_at"], name="batch_live_due", condition=_LIVE),
            models.Index(fields=["parked_at"], name="batch_parked", condition=_PARKED),
            models.Index(fields=["namespace", "-id"], name="batch_newest_first"),
        ]


class BatchTarget(models.Model):
    """One run a batch acts on, snapshotted when the batch starts; `outcome` says whether it is done."""

    PENDING, COMPLETED, FAILED = 0, 1, 2

    batch = models.ForeignKey(BatchOperation, on_delete=models.CASCADE, db_index=False)
    seq = models.IntegerField()
    """The target's place in the snapshot: targets are taken in this order."""
    workflow_id = models.CharField(max_length=1000)
    run_id = models.CharField(max_length=64, default="")
    outcome = models.SmallIntegerField(default=0)
    error = models.TextField(default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["batch", "seq"], name="batch_target_seq")]
        indexes = [
            models.Index(fields=["batch", "seq"], name="batch_target_pending", condition=Q(outcome=0)),
        ]


class HistoryArchive(models.Model):
    """Where a run's history was archived (engine/archival/history.py), kept after the run is deleted.

    Written in the fenced transaction that ends the run's ARCHIVE retention step, once the object was
    read back and its checksum compared. The run is named by its ids, not its row (which retention then
    deletes). `uri` is the namespace's history archival URI when the run was archived: a namespace that
    moves to another URI leaves its earlier runs readable where they went.
    """

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False, related_name="+")
    workflow_id = models.CharField(max_length=1000)
    run_id = models.CharField(max_length=64)
    close_time = models.DateTimeField()
    uri = models.CharField(max_length=1024)
    bucket = models.CharField(max_length=63)
    key = models.CharField(max_length=1024)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    events = models.BigIntegerField()
    """How many events the archive holds (1 through `events`)."""
    data_key_version = models.PositiveIntegerField()
    """The namespace data key version sealing the object (kept by rotation: versions are never deleted)."""
    archived_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "workflow_id", "run_id"], name="history_archive_run")
        ]
        indexes = [
            # A read without a run id takes the workflow id's newest archived run.
            models.Index(fields=["namespace", "workflow_id", "-close_time"], name="history_archive_latest"),
        ]


class WorkerDeployment(models.Model):
    """A worker deployment of a namespace, learned from the first versioned poll that names it.

    Its routing config (current and ramping build ids) decides which version new and auto-upgrade runs
    go to; `revision` is the routing config's revision number and the conflict token's content.
    """

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    name = models.CharField(max_length=255)
    created_at = models.DateTimeField()
    current_build_id = models.CharField(max_length=255, blank=True, default="")
    current_changed_at = models.DateTimeField(null=True)
    ramping_build_id = models.CharField(max_length=255, blank=True, default="")
    ramping_percentage = models.FloatField(default=0.0)
    ramping_changed_at = models.DateTimeField(null=True)
    ramping_percentage_changed_at = models.DateTimeField(null=True)
    revision = models.BigIntegerField(default=0)
    last_modifier_identity = models.CharField(max_length=1000, blank=True, default="")
    create_request_id = models.CharField(max_length=255, blank=True, default="")
    """The request id of the CreateWorkerDeployment that made it (its retry answers as the first did)."""
    manager_identity = models.CharField(max_length=1000, blank=True, default="")
    """Set: only this identity may change its routing or delete its versions (SetWorkerDeploymentManager)."""
    manager_changes = models.BigIntegerField(default=0)
    """Bumped with each manager change: part of the conflict token, not of the routing revision."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="worker_deployment_name")]


class WorkerDeploymentVersion(models.Model):
    """One build id of a worker deployment, learned from its pollers; `metadata` is a VersionMetadata."""

    deployment = models.ForeignKey(WorkerDeployment, on_delete=models.CASCADE, related_name="versions")
    build_id = models.CharField(max_length=255)
    created_at = models.DateTimeField()
    current_since = models.DateTimeField(null=True)
    ramping_since = models.DateTimeField(null=True)
    routing_changed_at = models.DateTimeField(null=True)
    first_activation_at = models.DateTimeField(null=True)
    last_current_at = models.DateTimeField(null=True)
    last_deactivation_at = models.DateTimeField(null=True)
    drained_at = models.DateTimeField(null=True)
    """When drainage found no open run pinned to it (engine/services/drainage.py); null while draining."""
    drainage_checked_at = models.DateTimeField(null=True)
    last_poll_at = models.DateTimeField(null=True)
    """Null for a version made by CreateWorkerDeploymentVersion that no worker has polled yet (CREATED)."""
    metadata = models.BinaryField(default=b"")
    last_modifier_identity = models.CharField(max_length=1000, blank=True, default="")
    create_request_id = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["deployment", "build_id"], name="worker_deployment_build_id")
        ]


class WorkerDeploymentTaskQueue(models.Model):
    """A task queue that a deployment's versioned workers poll: its new runs follow that deployment's routing."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, db_index=False)
    task_queue = models.CharField(max_length=1000)
    deployment = models.ForeignKey(WorkerDeployment, on_delete=models.CASCADE, related_name="task_queues")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "task_queue", "deployment"], name="worker_deployment_task_queue"
            )
        ]
