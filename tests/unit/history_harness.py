"""Drive a run through the pure history rules the way the service layer does, with a fixed clock.

Every input is applied to a fresh copy of the state (dump/load, as each transaction decodes the stored
state), and nothing of it is kept when it raises, exactly like `engine.services.write_path.run_update`.
Each step checks that the events it wrote continue the history densely.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from google.protobuf.duration_pb2 import Duration
from temporalio.api.command.v1 import (
    CancelTimerCommandAttributes,
    CancelWorkflowExecutionCommandAttributes,
    Command,
    CompleteWorkflowExecutionCommandAttributes,
    FailWorkflowExecutionCommandAttributes,
    RecordMarkerCommandAttributes,
    RequestCancelActivityTaskCommandAttributes,
    ScheduleActivityTaskCommandAttributes,
    StartTimerCommandAttributes,
)
from temporalio.api.common.v1 import ActivityType, Payload, Payloads, RetryPolicy, WorkflowType
from temporalio.api.enums.v1 import CommandType, EventType, WorkflowTaskFailedCause
from temporalio.api.failure.v1 import ApplicationFailureInfo, Failure, ServerFailureInfo
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    RespondWorkflowTaskCompletedRequest,
    StartWorkflowExecutionRequest,
)

from engine.history import activity, completion, lifecycle, timer, workflow_task
from engine.history import state as state_module
from engine.history.errors import CommandFailure
from engine.history.events import attributes
from engine.history.mutation import Mutation, NewTask, NewTimer
from engine.history.state import MutableState

T = TypeVar("T")

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
NAMESPACE_ID = "00000000-0000-0000-0000-00000000000a"
RUN_ID = "0195a2b0-0000-7000-8000-000000000001"
TASK_QUEUE = "tq"
WORKER = "worker-1"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def dur(seconds: float) -> Duration:
    value = Duration()
    value.FromTimedelta(timedelta(seconds=seconds))
    return value


def payloads(*values: str) -> Payloads:
    return Payloads(
        payloads=[Payload(metadata={"encoding": b"json/plain"}, data=f'"{v}"'.encode()) for v in values]
    )


def start_request(
    *,
    execution_timeout: float = 0,
    run_timeout: float = 0,
    task_timeout: float = 0,
    workflow_id: str = "wf-1",
    request_id: str = "start-req-1",
) -> StartWorkflowExecutionRequest:
    request = StartWorkflowExecutionRequest(
        namespace="default",
        workflow_id=workflow_id,
        workflow_type=WorkflowType(name="MyWorkflow"),
        task_queue=TaskQueue(name=TASK_QUEUE),
        identity="client-1",
        request_id=request_id,
    )
    if execution_timeout:
        request.workflow_execution_timeout.CopyFrom(dur(execution_timeout))
    if run_timeout:
        request.workflow_run_timeout.CopyFrom(dur(run_timeout))
    if task_timeout:
        request.workflow_task_timeout.CopyFrom(dur(task_timeout))
    return request


# --- failures ------------------------------------------------------------------------------------------


def app_failure(
    message: str = "boom",
    *,
    type: str = "RuntimeError",
    non_retryable: bool = False,
    next_retry_delay: float | None = None,
) -> Failure:
    info = ApplicationFailureInfo(type=type, non_retryable=non_retryable)
    if next_retry_delay is not None:
        info.next_retry_delay.CopyFrom(dur(next_retry_delay))
    return Failure(message=message, application_failure_info=info)


# --- commands ------------------------------------------------------------------------------------------


def schedule_activity(
    activity_id: str = "1",
    *,
    activity_type: str = "do_it",
    start_to_close: float = 0,
    schedule_to_close: float = 0,
    schedule_to_start: float = 0,
    heartbeat: float = 0,
    retry_policy: RetryPolicy | None = None,
    task_queue: str = "",
) -> Command:
    attrs = ScheduleActivityTaskCommandAttributes(
        activity_id=activity_id,
        activity_type=ActivityType(name=activity_type),
        task_queue=TaskQueue(name=task_queue) if task_queue else None,
        input=payloads("arg"),
    )
    for name, value in (
        ("start_to_close_timeout", start_to_close),
        ("schedule_to_close_timeout", schedule_to_close),
        ("schedule_to_start_timeout", schedule_to_start),
        ("heartbeat_timeout", heartbeat),
    ):
        if value:
            getattr(attrs, name).CopyFrom(dur(value))
    if retry_policy is not None:
        attrs.retry_policy.CopyFrom(retry_policy)
    return Command(
        command_type=CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
        schedule_activity_task_command_attributes=attrs,
    )


def request_cancel_activity(scheduled_event_id: int) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_REQUEST_CANCEL_ACTIVITY_TASK,
        request_cancel_activity_task_command_attributes=RequestCancelActivityTaskCommandAttributes(
            scheduled_event_id=scheduled_event_id
        ),
    )


def start_timer(timer_id: str, seconds: float) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_START_TIMER,
        start_timer_command_attributes=StartTimerCommandAttributes(
            timer_id=timer_id, start_to_fire_timeout=dur(seconds)
        ),
    )


def cancel_timer(timer_id: str) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_CANCEL_TIMER,
        cancel_timer_command_attributes=CancelTimerCommandAttributes(timer_id=timer_id),
    )


def complete_workflow(result: str | None = "done") -> Command:
    attrs = CompleteWorkflowExecutionCommandAttributes()
    if result is not None:
        attrs.result.CopyFrom(payloads(result))
    return Command(
        command_type=CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
        complete_workflow_execution_command_attributes=attrs,
    )


def fail_workflow(message: str = "wf failed") -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION,
        fail_workflow_execution_command_attributes=FailWorkflowExecutionCommandAttributes(
            failure=app_failure(message)
        ),
    )


def cancel_workflow() -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_CANCEL_WORKFLOW_EXECUTION,
        cancel_workflow_execution_command_attributes=CancelWorkflowExecutionCommandAttributes(),
    )


def record_marker(name: str) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_RECORD_MARKER,
        record_marker_command_attributes=RecordMarkerCommandAttributes(marker_name=name),
    )


# --- events --------------------------------------------------------------------------------------------


def short(event_type: int) -> str:
    return EventType.Name(event_type).removeprefix("EVENT_TYPE_")


def types(events: list[HistoryEvent]) -> list[str]:
    return [short(e.event_type) for e in events]


def attrs_of(event: HistoryEvent) -> Any:
    return attributes(event)


def assert_dense(events: list[HistoryEvent], first: int = 1) -> None:
    ids = [e.event_id for e in events]
    assert ids == list(range(first, first + len(ids))), f"event ids not dense from {first}: {ids}"


# --- the run -------------------------------------------------------------------------------------------


class CountingIds:
    """Deterministic ids for the rules: the nth run id and request id of a run are always the same."""

    def __init__(self) -> None:
        self.runs = 0
        self.requests = 0

    def run_id(self) -> str:
        self.runs += 1
        return f"0195a2b0-0000-7000-9000-{self.runs:012x}"

    def request_id(self) -> str:
        self.requests += 1
        return f"request-{self.requests}"


class Run:
    """One run, its full written history, and the rows each step asked for."""

    def __init__(
        self,
        request: StartWorkflowExecutionRequest | None = None,
        *,
        now: float = 0,
        roundtrip: bool = True,
        schedule_first_task: bool = True,
    ) -> None:
        self.roundtrip = roundtrip
        self.ids = CountingIds()
        m = lifecycle.start(
            namespace_id=NAMESPACE_ID,
            namespace="default",
            run_id=RUN_ID,
            request=request or start_request(),
            now=at(now),
            ids=self.ids,
            schedule_first_task=schedule_first_task,
        )
        self.state: MutableState = m.state
        self.history: list[HistoryEvent] = []
        self.steps: list[Mutation] = []
        self._record(m, first_id=1)

    # -- plumbing

    def _record(self, m: Mutation, *, first_id: int) -> None:
        assert_dense(m.events, first_id)
        assert m.state.next_event_id == first_id + len(m.events)
        self.state = m.state
        self.history.extend(m.events)
        self.steps.append(m)
        assert_dense(self.history)

    @property
    def last(self) -> Mutation:
        return self.steps[-1]

    @property
    def new_events(self) -> list[HistoryEvent]:
        return self.last.events

    @property
    def new_tasks(self) -> list[NewTask]:
        return self.last.tasks

    @property
    def new_timers(self) -> list[NewTimer]:
        return self.last.timers

    def copy_state(self) -> MutableState:
        return state_module.load(state_module.dump(self.state))

    def apply(self, now: float, fn: Callable[..., T], /, **kwargs: Any) -> T:
        """Apply one input at `now` (seconds after T0); on an exception the run is left unchanged."""
        m = Mutation(self.copy_state() if self.roundtrip else self.state, at(now), self.ids)
        first_id = m.state.next_event_id
        result = fn(m, **kwargs)
        self._record(m, first_id=first_id)
        return result

    def types(self) -> list[str]:
        return types(self.history)

    def event(self, event_id: int) -> HistoryEvent:
        return self.history[event_id - 1]

    # -- workflow tasks

    def start_wft(self, now: float, *, identity: str = WORKER, request_id: str = "poll-1"):
        wft = self.state.workflow_task
        assert wft is not None, "no workflow task to start"
        return self.apply(
            now,
            workflow_task.start,
            scheduled_event_id=wft.scheduled_event_id,
            attempt=wft.attempt,
            request_id=request_id,
            identity=identity,
        )

    def wft_token(self) -> tuple[int, int, int]:
        """(scheduled id, started id, attempt) of the started workflow task, as its task token names them."""
        wft = self.state.workflow_task
        assert wft is not None, "no workflow task"
        assert wft.started_event_id, "the workflow task is not started"
        return wft.scheduled_event_id, wft.started_event_id, wft.attempt

    def complete_wft(
        self,
        now: float,
        *commands: Command,
        identity: str = WORKER,
        force_create_new_workflow_task: bool = False,
        token: tuple[int, int, int] | None = None,
    ) -> CommandFailure | None:
        """Complete the started task; an invalid command fails it instead, as the service does."""
        scheduled_id, started_id, attempt = token or self.wft_token()
        request = RespondWorkflowTaskCompletedRequest(
            commands=list(commands),
            identity=identity,
            force_create_new_workflow_task=force_create_new_workflow_task,
        )
        try:
            self.apply(
                now,
                completion.complete,
                scheduled_event_id=scheduled_id,
                started_event_id=started_id,
                attempt=attempt,
                request=request,
            )
        except CommandFailure as failure:
            self.apply(
                now,
                workflow_task.fail,
                scheduled_event_id=scheduled_id,
                started_event_id=started_id,
                attempt=attempt,
                cause=failure.cause,
                failure=Failure(
                    message=failure.message,
                    server_failure_info=ServerFailureInfo(
                        non_retryable=failure.cause
                        != WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
                    ),
                ),
                identity=identity,
            )
            return failure
        return None

    def fail_wft(
        self,
        now: float,
        *,
        identity: str = WORKER,
        failure: Failure | None = None,
        token: tuple[int, int, int] | None = None,
    ) -> None:
        scheduled_id, started_id, attempt = token or self.wft_token()
        self.apply(
            now,
            workflow_task.fail,
            scheduled_event_id=scheduled_id,
            started_event_id=started_id,
            attempt=attempt,
            cause=WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE,
            failure=failure or app_failure("workflow code raised"),
            identity=identity,
        )

    def timeout_wft(self, now: float) -> None:
        wft = self.state.workflow_task
        assert wft is not None
        self.apply(
            now, workflow_task.time_out, scheduled_event_id=wft.scheduled_event_id, attempt=wft.attempt
        )

    def run_wft(self, now: float, *commands: Command) -> CommandFailure | None:
        """Poll and complete the pending workflow task at once."""
        self.start_wft(now)
        return self.complete_wft(now, *commands)

    # -- activities

    def activity_attempt(self, scheduled_event_id: int) -> int:
        return self.state.activities[scheduled_event_id].attempt

    def start_activity(self, now: float, scheduled_event_id: int, *, identity: str = "act-worker"):
        return self.apply(
            now,
            activity.start,
            scheduled_event_id=scheduled_event_id,
            attempt=self.activity_attempt(scheduled_event_id),
            identity=identity,
            request_id=f"act-poll-{now}",
        )

    def complete_activity(self, now: float, scheduled_event_id: int, result: str = "ok") -> None:
        self.apply(
            now,
            activity.complete,
            scheduled_event_id=scheduled_event_id,
            attempt=self.activity_attempt(scheduled_event_id),
            result=payloads(result),
            identity="act-worker",
        )

    def fail_activity(
        self,
        now: float,
        scheduled_event_id: int,
        failure: Failure | None = None,
        details: Payloads | None = None,
    ) -> None:
        self.apply(
            now,
            activity.fail,
            scheduled_event_id=scheduled_event_id,
            attempt=self.activity_attempt(scheduled_event_id),
            failure=failure or app_failure(),
            identity="act-worker",
            last_heartbeat_details=details,
        )

    def heartbeat(self, now: float, scheduled_event_id: int, details: Payloads | None = None) -> bool:
        """Heartbeat the current attempt; returns whether cancellation was requested."""
        return self.heartbeat_answer(now, scheduled_event_id, details).cancel_requested

    def heartbeat_answer(
        self,
        now: float,
        scheduled_event_id: int,
        details: Payloads | None = None,
        *,
        attempt: int | None = None,
    ) -> activity.HeartbeatAnswer:
        return self.apply(
            now,
            activity.heartbeat,
            scheduled_event_id=scheduled_event_id,
            attempt=self.activity_attempt(scheduled_event_id) if attempt is None else attempt,
            details=details,
        )

    def timeout_activity(
        self, now: float, scheduled_event_id: int, timeout_type: int, attempt: int | None = None
    ):
        return self.apply(
            now,
            activity.time_out,
            scheduled_event_id=scheduled_event_id,
            attempt=self.activity_attempt(scheduled_event_id) if attempt is None else attempt,
            timeout_type=timeout_type,
        )

    # -- the rest

    def signal(
        self, now: float, name: str = "sig", *, request_id: str = "", value: str | None = None
    ) -> None:
        self.apply(
            now,
            lifecycle.signal,
            signal_name=name,
            input=payloads(value) if value is not None else None,
            identity="client-1",
            request_id=request_id,
        )

    def fire_timer(self, now: float, timer_id: str) -> None:
        self.apply(now, timer.fire, started_event_id=self.state.timers[timer_id].started_event_id)
