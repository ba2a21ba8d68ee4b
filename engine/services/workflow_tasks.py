"""Workflow tasks: claim and start one for a poller, complete it (commands), fail it, time it out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from temporalio.api.enums.v1 import WorkflowTaskFailedCause
from temporalio.api.failure.v1 import Failure, ServerFailureInfo
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.protocol.v1 import Message
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.workflowservice.v1 import RespondWorkflowTaskCompletedRequest

from engine.errors import InvalidArgument, NotFound
from engine.history import completion, updates, workflow_task
from engine.history.errors import CommandFailure, StaleTask
from engine.history.mutation import Mutation, NewTask, TaskKind
from engine.history.state import WorkflowTaskInfo
from engine.matching import queue
from engine.models import Execution, Task
from engine.persistence import query_rows
from engine.services import activity_tasks, search_attributes, task_claims, task_routing, workflow_queries
from engine.services.write_path import run_update, update_execution
from engine.tokens import TaskToken
from tenants.models import Namespace

T = TypeVar("T")

TASK_NOT_FOUND = "Workflow task not found."


@dataclass(frozen=True, slots=True)
class StartedWorkflowTask:
    """What a poller needs to build its response; the history is read after the claim commits."""

    execution: Execution
    workflow_type: str
    task_queue: str
    scheduled_event_id: int
    started_event_id: int
    attempt: int
    previous_started_event_id: int
    scheduled_time: datetime
    started_time: datetime
    last_stored_event_id: int
    transient_events: list[HistoryEvent]
    first_event_id: int = 1
    """Where the history sent to the worker starts: after the last completed task for a sticky worker."""
    messages: list[Message] = field(default_factory=list)
    """Protocol messages (update requests) delivered with the task."""
    queries: dict[str, WorkflowQuery] = field(default_factory=dict)
    """Queries parked on the run, by id: the worker answers them in this task's completion."""
    events: list[HistoryEvent] | None = None
    """The history from `first_event_id` when the change that started the task made all of it (a run's
    first task handed over or started eagerly): then nothing is read after the commit."""


def _started(
    execution: Execution,
    m: Mutation,
    wft: WorkflowTaskInfo,
    *,
    sticky: bool,
    queries: dict[str, WorkflowQuery] | None = None,
) -> StartedWorkflowTask:
    state = m.state
    assert wft.started_time is not None
    previous = state.last_completed_wft_started_event_id
    first_event_id = previous + 1 if sticky and previous else 1
    return StartedWorkflowTask(
        execution=execution,
        workflow_type=state.workflow_type,
        task_queue=state.task_queue,
        scheduled_event_id=wft.scheduled_event_id,
        started_event_id=wft.started_event_id,
        attempt=wft.attempt,
        previous_started_event_id=previous,
        scheduled_time=wft.scheduled_time,
        started_time=wft.started_time,
        last_stored_event_id=state.next_event_id - 1,
        transient_events=workflow_task.transient_events(state),
        first_event_id=first_event_id,
        messages=updates.messages(state, wft.started_event_id),
        queries=queries or {},
        events=_made_here(m, first_event_id),
    )


def _made_here(m: Mutation, first_event_id: int) -> list[HistoryEvent] | None:
    """The history from `first_event_id` if `m` made all of it (its events are those it writes, with the
    ids they get, and their payloads as the worker is sent them), else None."""
    if not m.events or m.events[0].event_id > first_event_id:
        return None
    return [e for e in m.events if e.event_id >= first_event_id]


def started_task_for(execution: Execution, m: Mutation, wft: WorkflowTaskInfo) -> StartedWorkflowTask:
    """A workflow task started outside a poll (eager workflow start), for a worker without the run cached."""
    return _started(execution, m, wft, sticky=False)


def starter(
    *,
    identity: str,
    request_id: str,
    build_id: str = "",
    router: task_routing.Router | None = None,
) -> Callable[[Execution, Mutation, Task | NewTask], StartedWorkflowTask]:
    """How one poll starts the workflow task it takes: from the queue, or handed over as it is made."""

    def start(execution: Execution, m: Mutation, task: Task | NewTask) -> StartedWorkflowTask:
        wft = workflow_task.start(
            m,
            scheduled_event_id=task.scheduled_event_id,
            attempt=task.attempt,
            request_id=request_id,
            identity=identity,
            task_queue=task.task_queue,
            build_id=build_id,
            target_version_changed=router is not None and router.target_changed(m.state),
        )
        # A task taken from the worker's sticky queue goes to a worker that holds the run: new events only.
        return _started(
            execution,
            m,
            wft,
            sticky=task.task_queue != m.state.task_queue,
            queries=query_rows.parked(execution),
        )

    return start


def poll_once(
    *,
    namespace: Namespace,
    task_queue: str,
    identity: str,
    request_id: str,
    build_id: str = "",
    version: task_routing.PollerVersion | None = None,
) -> StartedWorkflowTask | workflow_queries.StartedQuery | queue.NotYet:
    """Claim the queue's next task for this poller (`version`: the deployment version it serves, if any)."""
    router = task_routing.router_for(namespace.id, version)
    start = starter(identity=identity, request_id=request_id, build_id=build_id, router=router)

    def start_query(task: Task) -> workflow_queries.StartedQuery:
        return workflow_queries.query_started(task, sticky=task.task_queue != task.execution.task_queue)

    return task_claims.claim(namespace.id, TaskKind.WORKFLOW, task_queue, start, start_query, router)


@dataclass(frozen=True, slots=True)
class CompletionResult:
    """Work handed straight back to the completing worker (eager activities, the next workflow task)."""

    activities: list[activity_tasks.StartedActivityTask]
    workflow_task: StartedWorkflowTask | None
    reset_history_event_id: int = 0
    """The speculative task was dropped: the worker must forget the events it saw after this one."""


def workflow_task_complete(
    *, namespace: Namespace, token: TaskToken, request: RespondWorkflowTaskCompletedRequest
) -> CompletionResult:
    """Apply the completion; an invalid command fails the task instead (InvalidArgument to the worker).

    Raises:
        NotFound: the token names no started workflow task (stale, replayed or the run closed).
        InvalidArgument: a command was invalid (bad search attributes among them); the task was failed
            with its cause.
        Unavailable: the visibility backend could not check the commands' search attributes.
    """
    try:
        search_attributes.commands_check(namespace=namespace, commands=request.commands)
    except InvalidArgument as e:
        # As Temporal: the task fails with cause BadSearchAttributes, and the worker retries it.
        workflow_task_fail(
            namespace=namespace,
            token=token,
            cause=WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES,
            failure=Failure(message=e.message),
            identity=request.identity,
            binary_checksum=request.binary_checksum,
        )
        raise

    def apply(execution: Execution, m: Mutation) -> CompletionResult:
        done = completion.complete(
            m,
            scheduled_event_id=token.scheduled_event_id,
            started_event_id=token.started_event_id,
            attempt=token.attempt,
            request=request,
        )
        # Answered queries leave the run first: the rest ride the next task (or go out as query tasks).
        workflow_queries.attached_answers(execution, request.query_results)
        return CompletionResult(
            activities=[activity_tasks.started(execution, m, info) for info in done.activities],
            workflow_task=_started(
                execution,
                m,
                done.workflow_task,
                sticky=bool(m.state.sticky_queue),
                queries=query_rows.parked(execution),
            )
            if done.workflow_task is not None
            else None,
            reset_history_event_id=done.reset_history_event_id,
        )

    try:
        return _update(namespace, token, apply)
    except CommandFailure as error:
        failure = error
        _update(
            namespace,
            token,
            lambda _e, m: workflow_task.fail(
                m,
                scheduled_event_id=token.scheduled_event_id,
                started_event_id=token.started_event_id,
                attempt=token.attempt,
                cause=failure.cause,
                failure=Failure(
                    message=failure.message,
                    server_failure_info=ServerFailureInfo(
                        non_retryable=failure.cause
                        != WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
                    ),
                ),
                identity=request.identity,
                binary_checksum=request.binary_checksum,
            ),
        )
        raise InvalidArgument(failure.message) from None


def workflow_task_fail(
    *,
    namespace: Namespace,
    token: TaskToken,
    cause: int,
    failure: Failure | None,
    identity: str,
    binary_checksum: str,
) -> None:
    _update(
        namespace,
        token,
        lambda _e, m: workflow_task.fail(
            m,
            scheduled_event_id=token.scheduled_event_id,
            started_event_id=token.started_event_id,
            attempt=token.attempt,
            cause=cause,
            failure=failure,
            identity=identity,
            binary_checksum=binary_checksum,
        ),
    )


def _update(namespace: Namespace, token: TaskToken, apply: Callable[[Execution, Mutation], T]) -> T:
    try:
        return run_update(
            namespace_id=namespace.id, workflow_id=token.workflow_id, run_id=token.run_id, apply=apply
        )
    except (StaleTask, NotFound):
        raise NotFound(TASK_NOT_FOUND) from None


def sticky_reset(*, namespace: Namespace, workflow_id: str, run_id: str) -> None:
    """ResetStickyTaskQueue: the next workflow task goes to the normal queue with the full history."""
    run_update(
        namespace_id=namespace.id,
        workflow_id=workflow_id,
        run_id=run_id,
        apply=lambda _e, m: workflow_task.unstick(m),
    )


def sticky_queue_shutdown(*, namespace: Namespace, sticky_queue: str) -> int:
    """A worker shut down: move the workflow tasks waiting on its sticky queue to their normal queues."""
    pending = list(
        Task.objects.filter(namespace_id=namespace.id, kind=TaskKind.WORKFLOW, task_queue=sticky_queue)
        .values_list("execution_id", flat=True)
        .distinct()
    )
    for execution_pk in pending:
        try:
            update_execution(execution_pk, lambda _e, m: workflow_task.unstick(m))
        except Execution.DoesNotExist:
            continue
    Task.objects.filter(namespace_id=namespace.id, kind=TaskKind.WORKFLOW, task_queue=sticky_queue).delete()
    return len(pending)
