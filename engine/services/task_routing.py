"""Which versioned (or unversioned) poller a run's workflow, query and activity tasks are for.

Worker versioning as Temporal 1.32 routes it: a run pinned to a deployment version (its last workflow task
completed on that version with the PINNED behaviour) only goes to pollers of that version. Any other run
(auto-upgrade, or not yet run by a versioned worker) goes to its deployment's ramping version if its
workflow id falls within the ramp percentage, else to the current version; a deployment with no current
version leaves its runs to unversioned pollers. A run's deployment is the one it last ran on, or else the
deployments whose versioned workers poll its task queue. The decision is taken when a poller claims a task,
so a routing change applies to tasks already queued, as on Temporal.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass

from temporalio.api.enums.v1 import VersioningBehavior

from engine.history.state import MutableState
from engine.models import WorkerDeployment, WorkerDeploymentTaskQueue

PINNED = VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
AUTO_UPGRADE = VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE


@dataclass(frozen=True, slots=True)
class PollerVersion:
    """The deployment version a poller serves; None stands for an unversioned poller."""

    deployment_name: str
    build_id: str


def ramp_point(workflow_id: str) -> float:
    """Where a workflow id falls in [0, 100): the same for all its runs, so a ramp moves whole workflows."""
    digest = hashlib.sha256(workflow_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * 100


def routed_build_id(deployment: WorkerDeployment, workflow_id: str, use_ramping: bool = False) -> str:
    """The build id a deployment sends an unpinned run to ('' for unversioned pollers)."""
    if deployment.ramping_build_id and (
        use_ramping or ramp_point(workflow_id) < deployment.ramping_percentage
    ):
        return deployment.ramping_build_id
    return deployment.current_build_id


def pinned_to(state: MutableState) -> PollerVersion | None:
    """The version a run is pinned to: by an operator's override, else by its last completed task."""
    if state.override_behavior == PINNED:
        return PollerVersion(state.override_deployment_name, state.override_build_id)
    if state.override_behavior == AUTO_UPGRADE:
        return None
    if state.versioning_behavior == PINNED and state.deployment_build_id:
        return PollerVersion(state.deployment_name, state.deployment_build_id)
    return None


class Router:
    """One claim's routing: decides, run by run, whether a task is for the polling worker."""

    def __init__(self, namespace_id: uuid.UUID, poller: PollerVersion | None) -> None:
        self._namespace_id = namespace_id
        self._poller = poller
        self._deployments: dict[str, WorkerDeployment | None] = {}
        self._queue_deployments: dict[str, list[WorkerDeployment]] = {}

    def accepts(self, state: MutableState) -> bool:
        pinned = pinned_to(state)
        if pinned is not None:
            return pinned == self._poller
        deployments = self._deployments_of(state)
        poller = self._poller
        if poller is None:
            return all(not routed_build_id(d, state.workflow_id, state.use_ramping) for d in deployments)
        mine = [d for d in deployments if d.name == poller.deployment_name]
        if not mine:
            # The run belongs to no deployment of this worker: only its own deployment's pollers take it.
            return False
        return routed_build_id(mine[0], state.workflow_id, state.use_ramping) == poller.build_id

    def accepts_activity(self, state: MutableState, task_queue: str) -> bool:
        """Whether an activity task of the run on `task_queue` is for this poller. As in Temporal: a pinned
        run's activity goes to its version when that version's deployment polls the queue; any other
        goes where the queue's deployments route the run (current or ramping version), or to unversioned
        pollers when no deployment routes it. A standalone activity has no version of its own."""
        pinned = pinned_to(state)
        deployments = self._queue_deployments_of(task_queue)
        if pinned is not None and any(d.name == pinned.deployment_name for d in deployments):
            return pinned == self._poller
        poller = self._poller
        if poller is None:
            return all(not routed_build_id(d, state.workflow_id, state.use_ramping) for d in deployments)
        mine = [d for d in deployments if d.name == poller.deployment_name]
        if not mine:
            return False
        return routed_build_id(mine[0], state.workflow_id, state.use_ramping) == poller.build_id

    def target_changed(self, state: MutableState) -> bool:
        """A run pinned by its workers' behaviour whose deployment now routes elsewhere (Temporal tells it,
        so that it can continue as new onto the new version)."""
        if state.override_behavior or state.versioning_behavior != PINNED or not state.deployment_build_id:
            return False
        deployment = self._deployment(state.deployment_name)
        if deployment is None:
            return False
        routed = routed_build_id(deployment, state.workflow_id)
        return bool(routed) and routed != state.deployment_build_id

    def _deployments_of(self, state: MutableState) -> list[WorkerDeployment]:
        if state.deployment_name:
            found = self._deployment(state.deployment_name)
            return [found] if found is not None else []
        if self._poller is not None:
            found = self._deployment(self._poller.deployment_name)
            return [found] if found is not None else []
        return self._queue_deployments_of(state.task_queue)

    def _queue_deployments_of(self, task_queue: str) -> list[WorkerDeployment]:
        if task_queue not in self._queue_deployments:
            rows = WorkerDeploymentTaskQueue.objects.filter(
                namespace_id=self._namespace_id, task_queue=task_queue
            ).select_related("deployment")
            self._queue_deployments[task_queue] = [row.deployment for row in rows]
        return self._queue_deployments[task_queue]

    def _deployment(self, name: str) -> WorkerDeployment | None:
        if name not in self._deployments:
            self._deployments[name] = WorkerDeployment.objects.filter(
                namespace_id=self._namespace_id, name=name
            ).first()
        return self._deployments[name]


DEPLOYMENTS_TTL_SECONDS = 1.0
"""How long this process trusts what it read of whether a namespace has worker deployments. Every claim
of an unversioned poller asked (6 reads per workflow on Postgres); a deployment another process creates
is seen within this long, and one created here at once (`forget_deployments`)."""
_has_deployments: dict[uuid.UUID, tuple[bool, float]] = {}


def has_deployments(namespace_id: uuid.UUID) -> bool:
    now = time.monotonic()
    cached = _has_deployments.get(namespace_id)
    if cached is not None and now < cached[1]:
        return cached[0]
    found = WorkerDeployment.objects.filter(namespace_id=namespace_id).exists()
    _has_deployments[namespace_id] = (found, now + DEPLOYMENTS_TTL_SECONDS)
    return found


def unversioned_known(namespace_id: uuid.UUID) -> bool:
    """Whether the namespace is known, without I/O, to have no deployments: then `router_for` answers None
    to an unversioned poller (a cache entry that lapsed or is missing says nothing)."""
    cached = _has_deployments.get(namespace_id)
    return cached is not None and time.monotonic() < cached[1] and not cached[0]


def forget_deployments(namespace_id: uuid.UUID) -> None:
    """A deployment of the namespace was created or deleted here (after its commit)."""
    _has_deployments.pop(namespace_id, None)


def router_for(namespace_id: uuid.UUID, poller: PollerVersion | None) -> Router | None:
    """The router of one claim; None when no routing applies (an unversioned poller, no deployments)."""
    if poller is None and not has_deployments(namespace_id):
        return None
    return Router(namespace_id, poller)
