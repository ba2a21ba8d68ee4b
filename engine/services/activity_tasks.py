"""Activity tasks: claim and start one for a poller, heartbeat, complete, fail, confirm cancellation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from temporalio.api.common.v1 import Payloads
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import ActivityTaskScheduledEventAttributes

from engine.errors import NotFound
from engine.history import activity
from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, NewTask, TaskKind
from engine.history.state import ActivityInfo
from engine.matching import queue
from engine.models import Execution, Task
from engine.persistence import store
from engine.services import task_claims, task_routing
from engine.services.write_path import run_update
from engine.tokens import TaskToken
from tenants.models import Namespace

TASK_NOT_FOUND = "invalid activityID or activity already timed out or invoking workflow is completed"


@dataclass(frozen=True, slots=True)
class StartedActivityTask:
    execution: Execution
    workflow_type: str
    scheduled_event_id: int
    attempt: int
    scheduled: ActivityTaskScheduledEventAttributes
    scheduled_time: datetime
    attempt_scheduled_time: datetime
    started_time: datetime
    heartbeat_details: Payloads | None


def started(execution: Execution, m: Mutation, info: ActivityInfo) -> StartedActivityTask:
    """What the worker gets for a started attempt (by poll, or eagerly in a workflow task completion)."""
    assert info.started_time is not None
    return StartedActivityTask(
        execution=execution,
        workflow_type=m.state.workflow_type,
        scheduled_event_id=info.scheduled_event_id,
        attempt=info.attempt,
        scheduled=activity.dispatch_attributes(info),
        scheduled_time=info.scheduled_time,
        attempt_scheduled_time=info.attempt_scheduled_time,
        started_time=info.started_time,
        heartbeat_details=Payloads.FromString(info.heartbeat_details) if info.heartbeat_details else None,
    )


def starter(
    *, identity: str, request_id: str, build_id: str = ""
) -> Callable[[Execution, Mutation, Task | NewTask], StartedActivityTask]:
    """How one poll starts the activity task it takes: from the queue, or handed over as it is made."""

    def start(execution: Execution, m: Mutation, task: Task | NewTask) -> StartedActivityTask:
        info = activity.start(
            m,
            scheduled_event_id=task.scheduled_event_id,
            attempt=task.attempt,
            identity=identity,
            request_id=request_id,
            build_id=build_id,
            task_queue=task.task_queue,
            visible_at=task.visible_at,
        )
        return started(execution, m, info)

    return start


def poll_once(
    *,
    namespace: Namespace,
    task_queue: str,
    identity: str,
    request_id: str,
    build_id: str = "",
    version: task_routing.PollerVersion | None = None,
) -> StartedActivityTask | queue.NotYet:
    """Claim the queue's next activity task this poller may take (worker versioning: `version`)."""
    start = starter(identity=identity, request_id=request_id, build_id=build_id)
    router = task_routing.router_for(namespace.id, version)
    return task_claims.claim(namespace.id, TaskKind.ACTIVITY, task_queue, start, router=router)


def _update(namespace: Namespace, token: TaskToken, apply: Callable[[Execution, Mutation], object]) -> object:
    try:
        return run_update(
            namespace_id=namespace.id, workflow_id=token.workflow_id, run_id=token.run_id, apply=apply
        )
    except StaleTask:
        raise NotFound(TASK_NOT_FOUND) from None


def activity_heartbeat(
    *, namespace: Namespace, token: TaskToken, details: Payloads | None
) -> activity.HeartbeatAnswer:
    """Record a heartbeat; the answer says whether the attempt was cancelled, paused or reset."""
    answer = _update(
        namespace,
        token,
        lambda _e, m: activity.heartbeat(
            m, scheduled_event_id=token.scheduled_event_id, attempt=token.attempt, details=details
        ),
    )
    assert isinstance(answer, activity.HeartbeatAnswer)
    return answer


def activity_complete(
    *, namespace: Namespace, token: TaskToken, result: Payloads | None, identity: str
) -> None:
    _update(
        namespace,
        token,
        lambda _e, m: activity.complete(
            m,
            scheduled_event_id=token.scheduled_event_id,
            attempt=token.attempt,
            result=result,
            identity=identity,
        ),
    )


def activity_fail(
    *,
    namespace: Namespace,
    token: TaskToken,
    failure: Failure,
    identity: str,
    last_heartbeat_details: Payloads | None,
) -> None:
    _update(
        namespace,
        token,
        lambda _e, m: activity.fail(
            m,
            scheduled_event_id=token.scheduled_event_id,
            attempt=token.attempt,
            failure=failure,
            identity=identity,
            last_heartbeat_details=last_heartbeat_details,
        ),
    )


def activity_canceled(
    *, namespace: Namespace, token: TaskToken, details: Payloads | None, identity: str
) -> None:
    _update(
        namespace,
        token,
        lambda _e, m: activity.canceled(
            m,
            scheduled_event_id=token.scheduled_event_id,
            attempt=token.attempt,
            details=details,
            identity=identity,
        ),
    )


def token_for(*, namespace: Namespace, workflow_id: str, run_id: str, activity_id: str) -> TaskToken:
    """The token of a started activity named by id (for completion from outside the worker).

    Raises:
        NotFound: no such run or activity, or it is not running an attempt right now.
    """
    execution = store.find_execution(namespace.id, workflow_id, run_id, lock=False)
    state = store.decode_state(execution)
    if not state.running:
        raise NotFound("workflow execution already completed")
    info = state.activity_by_id(activity_id)
    if info is None or info.started_time is None:
        raise NotFound(TASK_NOT_FOUND)
    return TaskToken(
        namespace_id=str(namespace.id),
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        scheduled_event_id=info.scheduled_event_id,
        attempt=info.attempt,
        activity_id=activity_id,
    )
