"""The mutable state of one run: what the history implies right now, kept beside it (encrypted)."""

from __future__ import annotations

from datetime import datetime

import msgspec
from temporalio.api.enums.v1 import WorkflowExecutionStatus

from engine.history.machines import ActivityState, ChildState, TimerState

RUNNING = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
PAUSED = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_PAUSED
OPEN_STATUSES = frozenset({RUNNING, PAUSED})
"""A paused run is still open (Temporal's IsWorkflowExecutionRunning): it takes signals, fires timers and
can be terminated; it only gets no workflow task, dispatches no activity and admits no update."""


class WorkflowTaskInfo(msgspec.Struct, kw_only=True):
    """The one workflow task a run may have in flight.

    Attempts above 1 are *transient*: their scheduled and started events are not written to history
    until the task completes, so a workflow task failing in a loop does not grow the history.
    """

    scheduled_event_id: int
    attempt: int = 1
    task_queue: str
    timeout: float
    """start-to-close timeout in seconds (grows with attempts, as Temporal's does)."""
    scheduled_time: datetime
    started_event_id: int = 0
    started_time: datetime | None = None
    request_id: str = ""
    identity: str = ""
    build_id: str = ""
    """The build id the polling worker reported, recorded on the started event."""
    target_version_changed: bool = False
    """The run is pinned to a version its deployment no longer routes to (the started event tells the
    worker, whose SDK then suggests continue-as-new)."""
    speculative: bool = False
    """Scheduled only to carry an update: like a transient task its events are written at completion,
    and not at all if the worker just rejects the update (Temporal's speculative workflow task)."""

    @property
    def deferred(self) -> bool:
        """Its scheduled and started events are not in history yet (a transient or speculative task)."""
        return self.attempt > 1 or self.speculative


class ActivityInfo(msgspec.Struct, kw_only=True):
    """A scheduled activity: retries happen here, without events, until its final outcome."""

    scheduled_event_id: int
    activity_id: str
    activity_type: str
    task_queue: str
    scheduled: bytes
    """The ActivityTaskScheduledEventAttributes (normalised), serialised."""
    scheduled_time: datetime
    schedule_to_close: float
    schedule_to_start: float
    start_to_close: float
    heartbeat: float
    attempt: int = 1
    attempt_scheduled_time: datetime
    started_time: datetime | None = None
    started_identity: str = ""
    started_request_id: str = ""
    started_build_id: str = ""
    """The build id the attempt's worker stamped on its poll (ActivityTaskStarted's worker_version)."""
    last_heartbeat_time: datetime | None = None
    heartbeat_details: bytes = b""
    last_failure: bytes = b""
    last_worker_identity: str = ""
    cancel_requested: bool = False
    cancel_requested_event_id: int = 0
    last_attempt_complete_time: datetime | None = None
    """When the last attempt failed or timed out: a retry's backoff counts from it."""
    task_visible_at: datetime | None = None
    """When an operator rescheduled the current attempt: its task row's visible time. Older rows for the
    attempt (pending before a pause, an option update or a reset) are stale; None means the attempt's
    scheduled time is that of its row."""
    paused: bool = False
    """Paused by an operator: no new attempt is dispatched and no timeout fires until it is unpaused;
    a running attempt may still complete (Temporal's PauseActivity)."""
    pause_time: datetime | None = None
    pause_identity: str = ""
    pause_reason: str = ""
    pause_request_id: str = ""
    reset_requested: bool = False
    """Reset while an attempt ran: its heartbeats answer activity_reset until the next attempt."""
    reset_heartbeats: bool = False
    """Reset with reset_heartbeat while an attempt ran: the next attempt starts without heartbeat details."""
    retry_policy: bytes | None = None
    """The retry policy an operator set (temporalio.api.common.v1.RetryPolicy); None: the scheduled one."""
    priority: bytes | None = None
    """The priority an operator set (temporalio.api.common.v1.Priority); None: the scheduled one."""

    @property
    def state(self) -> ActivityState:
        return ActivityState.SCHEDULED if self.started_time is None else ActivityState.STARTED


class StandaloneInfo(msgspec.Struct, kw_only=True):
    """What a run hosting a standalone activity (StartActivityExecution) keeps beside its one activity.

    The activity's retries, timeouts and heartbeats are those of any activity (engine/history/activity.py);
    its outcome closes the run (engine/history/standalone_outcome.py) instead of scheduling a workflow task.
    """

    activity_id: str
    """The id as the caller gave it (the run's workflow id carries a prefix: engine.history.standalone_ids)."""
    scheduled_event_id: int
    start_delay: float = 0.0
    cancel_request_id: str = ""
    canceled_reason: str = ""
    cancel_identity: str = ""
    terminate_request_id: str = ""
    final: ActivityInfo | None = None
    """The activity as it stood when it closed (the run's `activities` are emptied then): describe shows it."""
    outcome: bytes = b""
    """The temporalio.api.activity.v1.ActivityExecutionOutcome, serialised, once closed."""


class TimerInfo(msgspec.Struct, kw_only=True):
    timer_id: str
    started_event_id: int
    fire_at: datetime

    @property
    def state(self) -> TimerState:
        return TimerState.STARTED  # a timer leaves the run's state when it fires or is cancelled


class ChildInfo(msgspec.Struct, kw_only=True):
    """A child run this run started (or is starting), until its result is recorded."""

    initiated_event_id: int
    workflow_id: str
    workflow_type: str
    parent_close_policy: int = 0
    run_id: str = ""
    started_event_id: int = 0

    @property
    def state(self) -> ChildState:
        return ChildState.STARTED if self.run_id else ChildState.INITIATED


class ExternalRequest(msgspec.Struct, kw_only=True):
    """A signal or cancel request to another run, until its outcome is recorded."""

    initiated_event_id: int
    workflow_id: str
    run_id: str = ""
    control: str = ""


class UpdateInfo(msgspec.Struct, kw_only=True):
    """An update from admission to its outcome (stage: Temporal's UpdateWorkflowExecutionLifecycleStage)."""

    update_id: str
    request: bytes
    stage: int
    accepted_event_id: int = 0
    admitted_event_id: int = 0
    """Set when an UpdateAdmitted event carries the request (a reset reapplied it): the worker reads it
    from history, so no request message is sent and the acceptance does not repeat it."""
    outcome: bytes = b""
    aborted: bool = False
    """Never accepted before the run closed: its callers get NotFound, not an outcome."""
    ended_by_close: bool = False
    """The run closed before the workflow finished it (aborted, or failed by the server)."""
    continuing: bool = False
    """Aborted because a new run continues this one (continue-as-new, retry, cron): its caller is told to
    send it again (Temporal's retryable ErrWorkflowClosing), and it lands on the new run."""


class PauseInfo(msgspec.Struct, kw_only=True):
    """Why and by whom the run was paused (PauseWorkflowExecution), shown by describe."""

    pause_time: datetime
    identity: str = ""
    reason: str = ""
    request_id: str = ""
    """A pause repeated with this request id is a no-op; with another it is refused."""


class ParentInfo(msgspec.Struct, kw_only=True):
    namespace: str
    namespace_id: str
    workflow_id: str
    run_id: str
    initiated_event_id: int
    root_workflow_id: str
    root_run_id: str


class MutableState(msgspec.Struct, kw_only=True):
    """Everything needed to apply the next input to a run without reading its history."""

    namespace_id: str
    namespace: str
    workflow_id: str
    run_id: str
    first_run_id: str
    workflow_type: str
    task_queue: str
    status: int = RUNNING
    start_time: datetime
    execution_time: datetime
    close_time: datetime | None = None
    workflow_task_timeout: float
    run_timeout: float = 0.0
    execution_timeout: float = 0.0
    run_expiration: datetime | None = None
    execution_expiration: datetime | None = None
    start_request_id: str = ""
    next_event_id: int = 1
    last_completed_wft_started_event_id: int = 0
    workflow_task: WorkflowTaskInfo | None = None
    awaiting_backoff: bool = False
    """The first workflow task waits for a start delay or continue-as-new backoff timer."""
    wft_attempt: int = 1
    """The attempt the next workflow task will have (above 1 after failures and timeouts)."""
    sticky_queue: str = ""
    """The worker's own queue, once it asked for stickiness: workflow tasks go there with only new events."""
    sticky_timeout: float = 0.0
    """How long a task may wait on the sticky queue before it falls back to the normal queue."""
    activities: dict[int, ActivityInfo] = msgspec.field(default_factory=dict)
    timers: dict[str, TimerInfo] = msgspec.field(default_factory=dict)
    buffered: list[bytes] = msgspec.field(default_factory=list)
    """HistoryEvents (serialised, without ids) that arrived while a workflow task was in flight."""
    cancel_requested: bool = False
    signal_request_ids: list[str] = msgspec.field(default_factory=list)
    close_event_id: int = 0
    new_execution_run_id: str = ""
    history_size: int = 0
    state_transitions: int = 0
    memo: bytes = b""
    search_attributes: bytes = b""
    attempt: int = 1
    """The workflow retry attempt of this run (its retry policy starts the next one)."""
    start_attrs: bytes = b""
    """The WorkflowExecutionStartedEventAttributes, serialised: what a retry starts again with."""
    user_metadata: bytes = b""
    """The start's static summary and details (temporal.api.sdk.v1.UserMetadata), shown by describe."""
    parent: ParentInfo | None = None
    children: dict[int, ChildInfo] = msgspec.field(default_factory=dict)
    external_signals: dict[int, ExternalRequest] = msgspec.field(default_factory=dict)
    external_cancels: dict[int, ExternalRequest] = msgspec.field(default_factory=dict)
    updates: dict[str, UpdateInfo] = msgspec.field(default_factory=dict)
    pause: PauseInfo | None = None
    versioning_behavior: int = 0
    """The VersioningBehavior the last completed workflow task declared (pinned, auto-upgrade or none)."""
    deployment_name: str = ""
    deployment_build_id: str = ""
    worker_deployment_name: str = ""
    """The deployment named by the last completing worker, versioned or not (TemporalWorkerDeployment)."""
    use_ramping: bool = False
    """Continued as new with USE_RAMPING_VERSION: its first task goes to the ramping version, if any."""
    override_behavior: int = 0
    override_deployment_name: str = ""
    override_build_id: str = ""
    """An operator's versioning override (start request): pinned to this version, or auto-upgrade."""
    inherited_pinned: bool = False
    """The run started pinned to a version it inherited (a pinned parent's child, or a pinned run's
    continuation): its retries inherit the version too, while it stays pinned to it."""
    override_one_time: bool = False
    """The pinning override is one-time: it routes like a pin until a task completes on its version, then
    clears (VersioningOverride.one_time)."""
    """The deployment version that completed the run's last workflow task, for a versioned worker."""
    """Set while the run is paused (status PAUSED)."""
    standalone: StandaloneInfo | None = None
    """Set on a run that hosts a standalone activity rather than a workflow."""

    @property
    def running(self) -> bool:
        """Open: running or paused (a paused run is not closed)."""
        return self.status in OPEN_STATUSES

    @property
    def paused(self) -> bool:
        return self.status == PAUSED

    def activity_by_id(self, activity_id: str) -> ActivityInfo | None:
        for info in self.activities.values():
            if info.activity_id == activity_id:
                return info
        return None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(MutableState)


def dump(state: MutableState) -> bytes:
    return _encoder.encode(state)


def load(data: bytes) -> MutableState:
    return _decoder.decode(data)
