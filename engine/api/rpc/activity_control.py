"""Operator controls of a run's pending activities: pause, unpause, reset, update options.

Each comes twice: naming activities of a run by id, by type or all (PauseActivity and the like), and
naming one activity of a workflow by id as the CLI sends it, or without a workflow id a standalone
activity (PauseActivityExecution and the like). Temporal's frontend hands the second kind to the first.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import grpc
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, validation
from engine.api.rpc import resolve
from engine.errors import InvalidArgument
from engine.history.activity_control import Target
from engine.services import activity_control
from tenants.models import Namespace
from visibility.divisions import activity_host_id


@dataclass(frozen=True, slots=True)
class _Activities:
    """The pending activities a control names."""

    namespace: Namespace
    workflow_id: str
    run_id: str
    target: Target


async def _of_run(request: Any) -> _Activities:
    """By id, by type, or all activities of a run (Temporal's frontend checks)."""
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    which = request.WhichOneof("activity")
    if which is None:
        raise InvalidArgument("Either Activity.Id or Activity.Type should be set on request.")
    if which == "id":
        target = Target(activity_id=request.id)
    elif which == "type":
        target = Target(activity_type=request.type)
    else:
        target = Target(match_all=True)  # match_all or unpause_all
    return _Activities(namespace, request.execution.workflow_id, request.execution.run_id, target)


async def _of_workflow(request: Any) -> _Activities:
    """One activity of a workflow by id (Temporal's chasm/lib/activity frontend checks)."""
    namespace = await resolve.namespace(request.namespace)
    if not request.activity_id:
        raise InvalidArgument("activity ID is required")
    if len(request.activity_id) > validation.MAX_ID_LENGTH:
        raise InvalidArgument(
            f"activity ID exceeds length limit. Length={len(request.activity_id)} Limit={validation.MAX_ID_LENGTH}"
        )
    if request.run_id:
        try:
            uuid.UUID(request.run_id)
        except ValueError:
            raise InvalidArgument("invalid run id: must be a valid UUID") from None
    # Without a workflow id the activity is a standalone one: its host run (visibility.divisions).
    workflow_id = request.workflow_id or activity_host_id(request.activity_id)
    return _Activities(namespace, workflow_id, request.run_id, Target(activity_id=request.activity_id))


def _jitter(request: Any) -> float:
    jitter = request.jitter.ToTimedelta().total_seconds() if request.HasField("jitter") else 0.0
    if jitter < 0:
        raise InvalidArgument("invalid jitter: negative duration")
    return jitter


async def _pause(a: _Activities, request: Any, request_id: str) -> None:
    await dbthreads.run_in_turn(
        (a.namespace.id, a.workflow_id),
        activity_control.activity_pause,
        namespace=a.namespace,
        workflow_id=a.workflow_id,
        run_id=a.run_id,
        target=a.target,
        identity=request.identity,
        reason=request.reason,
        request_id=request_id,
    )


async def _unpause(a: _Activities, request: Any) -> None:
    await dbthreads.run_in_turn(
        (a.namespace.id, a.workflow_id),
        activity_control.activity_unpause,
        namespace=a.namespace,
        workflow_id=a.workflow_id,
        run_id=a.run_id,
        target=a.target,
        reset_attempts=request.reset_attempts,
        reset_heartbeat=request.reset_heartbeat,
        jitter=_jitter(request),
    )


async def _reset(a: _Activities, request: Any) -> None:
    await dbthreads.run_in_turn(
        (a.namespace.id, a.workflow_id),
        activity_control.activity_reset,
        namespace=a.namespace,
        workflow_id=a.workflow_id,
        run_id=a.run_id,
        target=a.target,
        reset_heartbeat=getattr(request, "reset_heartbeat", False),  # ResetActivityExecution: newer APIs only
        keep_paused=request.keep_paused,
        restore_original_options=request.restore_original_options,
        jitter=_jitter(request),
    )


async def _update_options(a: _Activities, request: Any) -> Any:
    if request.HasField("activity_options"):
        validation.priority(request.activity_options.priority)
    return await dbthreads.run_in_turn(
        (a.namespace.id, a.workflow_id),
        activity_control.activity_update_options,
        namespace=a.namespace,
        workflow_id=a.workflow_id,
        run_id=a.run_id,
        target=a.target,
        options=request.activity_options if request.HasField("activity_options") else None,
        paths=list(request.update_mask.paths) if request.HasField("update_mask") else None,
        restore_original=request.restore_original,
    )


async def pause_activity(
    request: rr.PauseActivityRequest, context: grpc.aio.ServicerContext
) -> rr.PauseActivityResponse:
    await _pause(await _of_run(request), request, request.request_id)
    return rr.PauseActivityResponse()


async def pause_activity_execution(
    request: rr.PauseActivityExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.PauseActivityExecutionResponse:
    await _pause(await _of_workflow(request), request, request.request_id or str(uuid.uuid4()))
    return rr.PauseActivityExecutionResponse()


async def unpause_activity(
    request: rr.UnpauseActivityRequest, context: grpc.aio.ServicerContext
) -> rr.UnpauseActivityResponse:
    await _unpause(await _of_run(request), request)
    return rr.UnpauseActivityResponse()


async def unpause_activity_execution(
    request: rr.UnpauseActivityExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.UnpauseActivityExecutionResponse:
    await _unpause(await _of_workflow(request), request)
    return rr.UnpauseActivityExecutionResponse()


async def reset_activity(
    request: rr.ResetActivityRequest, context: grpc.aio.ServicerContext
) -> rr.ResetActivityResponse:
    await _reset(await _of_run(request), request)
    return rr.ResetActivityResponse()


async def reset_activity_execution(
    request: rr.ResetActivityExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.ResetActivityExecutionResponse:
    await _reset(await _of_workflow(request), request)
    return rr.ResetActivityExecutionResponse()


async def update_activity_options(
    request: rr.UpdateActivityOptionsRequest, context: grpc.aio.ServicerContext
) -> rr.UpdateActivityOptionsResponse:
    return rr.UpdateActivityOptionsResponse(
        activity_options=await _update_options(await _of_run(request), request)
    )


async def update_activity_execution_options(
    request: rr.UpdateActivityExecutionOptionsRequest, context: grpc.aio.ServicerContext
) -> rr.UpdateActivityExecutionOptionsResponse:
    options = await _update_options(await _of_workflow(request), request)
    return rr.UpdateActivityExecutionOptionsResponse(activity_options=options)
