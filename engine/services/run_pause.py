"""Operator controls of a whole run: pause, unpause (PauseWorkflowExecution, UnpauseWorkflowExecution) and
UpdateWorkflowExecutionOptions."""

from __future__ import annotations

from temporalio.api.workflow.v1 import WorkflowExecutionOptions

from engine.history import pause, run_options
from engine.services import deployments
from engine.services.write_path import run_update
from tenants.models import Namespace


def workflow_pause(
    *, namespace: Namespace, workflow_id: str, run_id: str, identity: str, reason: str, request_id: str
) -> None:
    """Pause a run (the current run of `workflow_id` when `run_id` is empty).

    Raises:
        NotFound: no such run, or it is closed ("workflow execution already completed").
        FailedPrecondition: the run is already paused by another request.
    """
    run_update(
        namespace_id=namespace.id,
        workflow_id=workflow_id,
        run_id=run_id,
        apply=lambda _e, m: pause.pause(m, identity=identity, reason=reason, request_id=request_id),
    )


def workflow_unpause(
    *, namespace: Namespace, workflow_id: str, run_id: str, identity: str, reason: str, request_id: str
) -> None:
    """Unpause a paused run: a workflow task is scheduled and waiting activities are dispatched.

    Raises:
        NotFound: no such run, or it is closed.
        FailedPrecondition: the run is not paused.
    """
    run_update(
        namespace_id=namespace.id,
        workflow_id=workflow_id,
        run_id=run_id,
        apply=lambda _e, m: pause.unpause(m, identity=identity, reason=reason, request_id=request_id),
    )


def workflow_update_options(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    options: WorkflowExecutionOptions,
    paths: list[str],
    identity: str,
) -> WorkflowExecutionOptions:
    """Update the masked options of a run; returns the options in force afterwards.

    Raises:
        NotFound: no such run, or it is closed.
        InvalidArgument: the override is incomplete, or the mask names part of it.
        FailedPrecondition: a pinning (or one-time) override names no version the run's task queue knows.
        Unimplemented: a time-skipping config is set.
    """

    def in_queue(task_queue: str, deployment_name: str, build_id: str) -> bool:
        return deployments.version_in_queue(namespace.id, task_queue, deployment_name, build_id)

    return run_update(
        namespace_id=namespace.id,
        workflow_id=workflow_id,
        run_id=run_id,
        apply=lambda _e, m: run_options.update(
            m, options=options, paths=paths, identity=identity, version_in_queue=in_queue
        ),
    )
