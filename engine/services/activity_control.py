"""Operator controls of a run's pending activities: pause, unpause, reset, update options (one transaction each)."""

from __future__ import annotations

import random

from temporalio.api.activity.v1 import ActivityOptions

from engine.history import activity_control
from engine.history.activity_control import Target
from engine.services.write_path import run_update
from tenants.models import Namespace


def activity_pause(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    target: Target,
    identity: str,
    reason: str,
    request_id: str,
) -> None:
    """Pause the targeted activities of a run (its current run when `run_id` is empty).

    Raises:
        NotFound: no such run, the run is closed, or no pending activity matches.
        FailedPrecondition: an activity is already paused by another request.
    """
    run_update(
        namespace_id=namespace.id,
        workflow_id=workflow_id,
        run_id=run_id,
        apply=lambda _e, m: activity_control.pause(
            m, target=target, identity=identity, reason=reason, request_id=request_id
        ),
    )


def activity_unpause(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    target: Target,
    reset_attempts: bool,
    reset_heartbeat: bool,
    jitter: float,
) -> None:
    """Unpause the targeted activities; those not running are dispatched within `jitter` seconds.

    Raises:
        NotFound: no such run, the run is closed, or no pending activity matches.
    """
    run_update(
        namespace_id=namespace.id,
        workflow_id=workflow_id,
        run_id=run_id,
        apply=lambda _e, m: activity_control.unpause(
            m,
            target=target,
            reset_attempts=reset_attempts,
            reset_heartbeat=reset_heartbeat,
            jitter=jitter,
            draw=random.random,
        ),
    )


def activity_reset(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    target: Target,
    reset_heartbeat: bool,
    keep_paused: bool,
    restore_original_options: bool,
    jitter: float,
) -> None:
    """Reset the targeted activities to attempt 1.

    Raises:
        NotFound: no such run, the run is closed, or no pending activity matches.
    """
    run_update(
        namespace_id=namespace.id,
        workflow_id=workflow_id,
        run_id=run_id,
        apply=lambda _e, m: activity_control.reset(
            m,
            target=target,
            reset_heartbeat=reset_heartbeat,
            keep_paused=keep_paused,
            restore_original_options=restore_original_options,
            jitter=jitter,
            draw=random.random,
        ),
    )


def activity_update_options(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    target: Target,
    options: ActivityOptions | None,
    paths: list[str] | None,
    restore_original: bool,
) -> ActivityOptions:
    """Update (or restore) the options of the targeted activities; returns the options in force.

    Raises:
        NotFound: no such run, the run is closed, or no pending activity matches.
        InvalidArgument: a missing mask or options, or options an activity cannot have.
    """
    return run_update(
        namespace_id=namespace.id,
        workflow_id=workflow_id,
        run_id=run_id,
        apply=lambda _e, m: activity_control.update_options(
            m, target=target, options=options, paths=paths, restore_original=restore_original
        ),
    )
