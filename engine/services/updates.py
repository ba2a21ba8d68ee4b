"""Workflow updates from clients: admit one (deduplicated by id) and read where it stands."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.api.enums.v1 import ResourceExhaustedCause, ResourceExhaustedScope
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure
from temporalio.api.update.v1 import Outcome, Request

from engine.errors import FailedPrecondition, NotFound, ResourceExhausted
from engine.history import pause, updates
from engine.history.mutation import Mutation
from engine.history.state import MutableState
from engine.models import Execution
from engine.persistence import store
from engine.services.write_path import run_update
from tenants.models import Namespace


@dataclass(frozen=True, slots=True)
class UpdateStatus:
    execution: Execution
    run_id: str
    stage: int
    outcome: Outcome | None
    ended_by_close: bool = False


def _status(
    execution: Execution,
    update_id: str,
    state: MutableState,
    include_ended: bool = False,
    waiting: bool = False,
) -> UpdateStatus:
    info = state.updates.get(update_id)
    if info is None:
        raise NotFound(f"update {update_id!r} not found")
    if info.aborted and not include_ended:
        if info.continuing and waiting:
            # The run continued in a new one before the workflow saw the update: the SDK sends it again
            # on this answer, and the run it resolves now is the new one (Temporal's ErrWorkflowClosing).
            raise ResourceExhausted(
                updates.CLOSING,
                ResourceExhaustedFailure(
                    cause=ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW,
                    scope=ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
                ),
            )
        if info.continuing:
            raise NotFound("workflow execution already completed")
        raise NotFound(updates.ABORTED_BY_CLOSE)
    return UpdateStatus(
        execution=execution,
        run_id=execution.run_id,
        stage=info.stage,
        outcome=Outcome.FromString(info.outcome) if info.outcome else None,
        ended_by_close=info.ended_by_close,
    )


def update_admit(
    *, namespace: Namespace, workflow_id: str, run_id: str, request: Request, first_execution_run_id: str = ""
) -> UpdateStatus:
    """Admit the update to the run (or join the one with the same id).

    Raises:
        NotFound: no such run, or it has closed (unless this update already finished there).
        FailedPrecondition: the run is paused.
    """
    execution = store.find_execution(namespace.id, workflow_id, run_id, lock=False)
    state = store.decode_state(execution)
    if first_execution_run_id and state.first_run_id != first_execution_run_id:
        # The handle belongs to an earlier chain of this workflow id, which has closed.
        raise NotFound("workflow execution not found for the given first execution run id")
    if request.meta.update_id in state.updates or not state.running:
        if request.meta.update_id not in state.updates:
            raise NotFound("workflow execution already completed")
        return _status(execution, request.meta.update_id, state)
    if state.paused:
        raise FailedPrecondition(pause.UPDATE_WHILE_PAUSED)

    def admit(execution: Execution, m: Mutation) -> UpdateStatus:
        if not m.state.running:
            raise NotFound("workflow execution already completed")
        if m.state.paused:
            raise FailedPrecondition(pause.UPDATE_WHILE_PAUSED)
        updates.admit(m, request)
        return _status(execution, request.meta.update_id, m.state)

    return run_update(
        namespace_id=namespace.id, workflow_id=workflow_id, run_id=execution.run_id, apply=admit
    )


def update_status(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    update_id: str,
    include_ended: bool = False,
    waiting: bool = False,
) -> UpdateStatus:
    """Where the update stands. `include_ended` also returns updates the run's close aborted.

    Raises:
        NotFound: no such run or update, or the update was aborted by the run's close.
        ResourceExhausted: (`waiting`: for a caller waiting on the update since it was admitted) a new run
            continued this one before the workflow saw the update; the caller is to send it again.
    """
    execution = store.find_execution(namespace.id, workflow_id, run_id, lock=False)
    return _status(execution, update_id, store.decode_state(execution), include_ended, waiting)
