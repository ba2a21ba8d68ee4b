"""Worker deployments and their versions: learned from versioned polls, routed by operators.

A deployment exists from the first poll whose `deployment_options` name it with versioning on (as on
Temporal, which has no create call an SDK needs); each build id that polls becomes one of its versions.
Operators then set the current and ramping versions. Every query is scoped by the namespace.
The messages are Temporal Server 1.32's, so a person reading either server's errors sees the same text.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from perdura import clock
from temporalio.api.deployment.v1 import VersionMetadata
from temporalio.api.enums.v1 import WorkerDeploymentVersionStatus

from engine import notify
from engine.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from engine.history.mutation import TaskKind
from engine.models import WorkerDeployment, WorkerDeploymentTaskQueue, WorkerDeploymentVersion
from engine.services import task_routing

UNVERSIONED = "__unversioned__"
"""The version string that names no version: current or ramping unversioned workers."""
MAX_NAME_LENGTH = 255
ACTIVE_POLLER_WINDOW = timedelta(minutes=5)
"""A version polled this recently has active pollers, and cannot be deleted (as Temporal)."""
_SEEN_REFRESH_SECONDS = 10.0
"""How often a version's last poll time is written: polls are frequent, the time only needs minutes."""

DEPLOYMENT_NOT_FOUND = "no Worker Deployment found with name '{}'; does your Worker Deployment have pollers?"
VERSION_NOT_FOUND = "build ID '{}' not found in Worker Deployment '{}'"
CONFLICT = "conflict token mismatch"

Status = WorkerDeploymentVersionStatus
_WAKE_POLLERS = 1000
"""Every poller waiting on a deployment's queues rechecks after a routing change (each takes what is its own)."""


@dataclass(frozen=True, slots=True)
class Ref:
    """A version named by a request: its deployment and build id (empty build id: unversioned)."""

    deployment_name: str
    build_id: str


def version_string(deployment_name: str, build_id: str) -> str:
    """The canonical version string the SDKs build and compare (`<deployment>.<build id>`)."""
    return f"{deployment_name}.{build_id}" if build_id else UNVERSIONED


def parse_version(version: str, *, deployment_name: str = "") -> Ref:
    """A version string, `<deployment>.<build id>` or Server 1.32's `<deployment>:<build id>`."""
    if version == UNVERSIONED:
        return Ref(deployment_name, "")
    if (
        deployment_name
        and version.startswith(deployment_name)
        and version[len(deployment_name) : len(deployment_name) + 1] in (".", ":")
    ):
        name, build_id = deployment_name, version[len(deployment_name) + 1 :]
    else:
        separator = ":" if ":" in version else "."
        name, found, build_id = version.partition(separator)
        if not found or not name or not build_id:
            raise InvalidArgument(
                f'invalid version string "{version}", expected format is "<deployment_name>.<build_id>"'
            )
    if deployment_name and name != deployment_name:
        raise InvalidArgument(
            f"invalid version string '{version}' does not match deployment name '{deployment_name}'"
        )
    return Ref(name, build_id)


def conflict_token(deployment: WorkerDeployment) -> bytes:
    return struct.pack(">qq", deployment.revision, deployment.manager_changes)


MANAGER_MISMATCH = (
    "ManagerIdentity '{}' is set and does not match user identity '{}'; to proceed, set your own identity "
    "as the ManagerIdentity, remove the ManagerIdentity, or wait for the other client to do so"
)


def _check_manager(deployment: WorkerDeployment, identity: str) -> None:
    if deployment.manager_identity and deployment.manager_identity != identity:
        raise FailedPrecondition(MANAGER_MISMATCH.format(deployment.manager_identity, identity))


def set_manager(
    namespace_id: uuid.UUID, name: str, manager_identity: str, *, token: bytes, identity: str
) -> tuple[WorkerDeployment, str]:
    """Name the one identity that may change the deployment's routing (empty: anyone); returns the
    deployment and the previous manager. Setting what is already set, by the last modifier, changes
    nothing (as Temporal's "no change")."""
    with transaction.atomic():
        deployment = (
            WorkerDeployment.objects.select_for_update().filter(namespace_id=namespace_id, name=name).first()
        )
        if deployment is None:
            raise NotFound(DEPLOYMENT_NOT_FOUND.format(name))
        previous = deployment.manager_identity
        if previous == manager_identity and deployment.last_modifier_identity == identity:
            return deployment, previous
        if token and token != conflict_token(deployment):
            raise FailedPrecondition(CONFLICT)
        deployment.manager_identity = manager_identity
        deployment.last_modifier_identity = identity
        deployment.manager_changes += 1
        deployment.save(update_fields=["manager_identity", "last_modifier_identity", "manager_changes"])
        return deployment, previous


def validate_name(name: str, what: str = "deployment name") -> None:
    if not name:
        raise InvalidArgument(f"{what} cannot be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(f"{what} cannot be longer than {MAX_NAME_LENGTH} characters")


# --- learning from polls ----------------------------------------------------------------------------

_seen_lock = threading.Lock()
_seen: dict[tuple[uuid.UUID, str, str, str], float] = {}


def poll_seen(namespace_id: uuid.UUID, deployment_name: str, build_id: str, task_queue: str) -> None:
    """A versioned worker polled: register its deployment and version, or refresh its last poll time.

    Throttled per version in this process; the first poll of a version always writes it, so it is
    describable before that poll returns.
    """
    key = (namespace_id, deployment_name, build_id, task_queue)
    now_mono = time.monotonic()
    with _seen_lock:
        last = _seen.get(key)
        if last is not None and now_mono - last < _SEEN_REFRESH_SECONDS:
            return
        _seen[key] = now_mono
    try:
        _record_poll(namespace_id, deployment_name, build_id, task_queue)
    except IntegrityError:
        # Two processes registered the same version at once: the other one's row is as good as ours.
        with _seen_lock:
            _seen.pop(key, None)


def _record_poll(namespace_id: uuid.UUID, deployment_name: str, build_id: str, task_queue: str) -> None:
    now = clock.now()
    with transaction.atomic():
        deployment, created = WorkerDeployment.objects.get_or_create(
            namespace_id=namespace_id, name=deployment_name, defaults={"created_at": now}
        )
        if created:
            transaction.on_commit(lambda: task_routing.forget_deployments(namespace_id))
        updated = WorkerDeploymentVersion.objects.filter(deployment=deployment, build_id=build_id).update(
            last_poll_at=now
        )
        if not updated:
            WorkerDeploymentVersion.objects.create(
                deployment=deployment, build_id=build_id, created_at=now, last_poll_at=now
            )
        WorkerDeploymentTaskQueue.objects.get_or_create(
            namespace_id=namespace_id, task_queue=task_queue, deployment=deployment
        )


# --- creation by API (CreateWorkerDeployment, CreateWorkerDeploymentVersion) ------------------------------


def validate_new_name(name: str) -> None:
    validate_name(name)
    if "." in name:
        raise InvalidArgument("worker deployment name cannot contain '.'")


def create_deployment(
    namespace_id: uuid.UUID, name: str, *, identity: str, request_id: str
) -> WorkerDeployment:
    """A deployment made before its workers poll (Server 1.32's messages). Its create request, sent again
    with the same request id, answers as the first did.

    Raises:
        AlreadyExists: a deployment of that name exists (made by another request, or by polls).
    """
    with transaction.atomic():
        found = WorkerDeployment.objects.filter(namespace_id=namespace_id, name=name).first()
        if found is not None:
            if request_id and found.create_request_id == request_id:
                return found
            raise AlreadyExists(f'Worker Deployment with name "{name}" already exists')
        deployment = WorkerDeployment.objects.create(
            namespace_id=namespace_id,
            name=name,
            created_at=clock.now(),
            last_modifier_identity=identity,
            create_request_id=request_id,
        )
        transaction.on_commit(lambda: task_routing.forget_deployments(namespace_id))
        return deployment


def create_version(namespace_id: uuid.UUID, ref: Ref, *, identity: str, request_id: str) -> None:
    """A version made before its workers poll: CREATED until one does.

    Raises:
        NotFound: no such deployment.
        AlreadyExists: the version exists (made by another request, or by polls).
    """
    with transaction.atomic():
        deployment = get_deployment(namespace_id, ref.deployment_name)
        found = deployment.versions.filter(build_id=ref.build_id).first()
        if found is not None:
            if request_id and found.create_request_id == request_id:
                return
            raise AlreadyExists(
                f'Worker Deployment Version "{version_string(ref.deployment_name, ref.build_id)}" already exists'
            )
        WorkerDeploymentVersion.objects.create(
            deployment=deployment,
            build_id=ref.build_id,
            created_at=clock.now(),
            last_poll_at=None,
            last_modifier_identity=identity,
            create_request_id=request_id,
        )


def forget_seen() -> None:
    """Drop the poll throttle (a deleted version must be registered again by its next poll)."""
    with _seen_lock:
        _seen.clear()


# --- reads ------------------------------------------------------------------------------------------


def get_deployment(namespace_id: uuid.UUID, name: str) -> WorkerDeployment:
    deployment = WorkerDeployment.objects.filter(namespace_id=namespace_id, name=name).first()
    if deployment is None:
        raise NotFound(DEPLOYMENT_NOT_FOUND.format(name))
    return deployment


def versions(deployment: WorkerDeployment) -> list[WorkerDeploymentVersion]:
    return list(deployment.versions.order_by("created_at", "id"))


def get_version(namespace_id: uuid.UUID, ref: Ref) -> WorkerDeploymentVersion:
    version = (
        WorkerDeploymentVersion.objects.select_related("deployment")
        .filter(
            deployment__namespace_id=namespace_id,
            deployment__name=ref.deployment_name,
            build_id=ref.build_id,
        )
        .first()
    )
    if version is None:
        raise NotFound(VERSION_NOT_FOUND.format(ref.build_id, ref.deployment_name))
    return version


def version_in_queue(namespace_id: uuid.UUID, task_queue: str, deployment_name: str, build_id: str) -> bool:
    """Whether the version is known and its deployment's workers poll `task_queue` (what a pinning
    override must name: a run pinned elsewhere would wait for pollers that never come)."""
    return WorkerDeploymentVersion.objects.filter(
        deployment__namespace_id=namespace_id,
        deployment__name=deployment_name,
        build_id=build_id,
        deployment__task_queues__task_queue=task_queue,
    ).exists()


def list_deployments(namespace_id: uuid.UUID, *, after_id: int, page_size: int) -> list[WorkerDeployment]:
    rows = WorkerDeployment.objects.filter(namespace_id=namespace_id, id__gt=after_id).order_by("id")
    return list(rows[:page_size])


def status(deployment: WorkerDeployment, version: WorkerDeploymentVersion) -> int:
    """The version's status: a version no longer routed to drains until no open run is pinned to it
    (engine/services/drainage.py)."""
    if deployment.current_build_id == version.build_id:
        return Status.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT
    if deployment.ramping_build_id == version.build_id:
        return Status.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING
    if version.last_deactivation_at is not None and version.drained_at is not None:
        return Status.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED
    if version.last_deactivation_at is not None:
        return Status.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING
    if version.last_poll_at is None:
        return Status.WORKER_DEPLOYMENT_VERSION_STATUS_CREATED
    return Status.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE


# --- routing changes --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RoutingChange:
    deployment: WorkerDeployment
    previous_build_id: str
    previous_percentage: float = 0.0


def _locked(namespace_id: uuid.UUID, name: str, token: bytes) -> WorkerDeployment:
    deployment = (
        WorkerDeployment.objects.select_for_update().filter(namespace_id=namespace_id, name=name).first()
    )
    if deployment is None:
        raise NotFound(DEPLOYMENT_NOT_FOUND.format(name))
    if token and token != conflict_token(deployment):
        raise FailedPrecondition(CONFLICT)
    return deployment


def _version_row(deployment: WorkerDeployment, build_id: str) -> WorkerDeploymentVersion:
    version = deployment.versions.select_for_update().filter(build_id=build_id).first()
    if version is None:
        raise NotFound(VERSION_NOT_FOUND.format(build_id, deployment.name))
    return version


def _activate(version: WorkerDeploymentVersion, now: datetime) -> None:
    version.routing_changed_at = now
    version.first_activation_at = version.first_activation_at or now
    version.last_deactivation_at = None
    version.drained_at = None
    version.drainage_checked_at = None


def _deactivate(deployment: WorkerDeployment, build_id: str, now: datetime) -> None:
    """`build_id` stops being routed to; it drains, unless it is still the other routing target."""
    if not build_id or build_id in (deployment.current_build_id, deployment.ramping_build_id):
        return
    deployment.versions.filter(build_id=build_id).update(
        current_since=None,
        ramping_since=None,
        routing_changed_at=now,
        last_deactivation_at=now,
        drained_at=None,
        drainage_checked_at=None,
    )


def set_current(
    namespace_id: uuid.UUID, name: str, build_id: str, *, token: bytes, identity: str
) -> RoutingChange:
    """Make `build_id` (empty: unversioned workers) the version new and auto-upgrade runs go to."""
    now = clock.now()
    with transaction.atomic():
        deployment = _locked(namespace_id, name, token)
        previous = deployment.current_build_id
        if build_id == previous:
            return RoutingChange(deployment, previous)
        if build_id:
            version = _version_row(deployment, build_id)
            _activate(version, now)
            version.current_since = now
            version.last_current_at = now
            version.ramping_since = None
            version.save()
        _check_manager(deployment, identity)  # last, as Temporal checks it (a rollback undoes the above)
        deployment.current_build_id = build_id
        deployment.current_changed_at = now
        if deployment.ramping_build_id == build_id and build_id:
            # The ramping version became current: nothing ramps any more (as Temporal).
            deployment.ramping_build_id = ""
            deployment.ramping_percentage = 0.0
            deployment.ramping_changed_at = now
            deployment.ramping_percentage_changed_at = now
        if previous:
            deployment.versions.filter(build_id=previous).update(current_since=None, last_current_at=now)
        _deactivate(deployment, previous, now)
        _bump(deployment, identity)
        return RoutingChange(deployment, previous)


def set_ramping(
    namespace_id: uuid.UUID, name: str, build_id: str, percentage: float, *, token: bytes, identity: str
) -> RoutingChange:
    """Ramp `percentage` of new and auto-upgrade runs to `build_id`; an empty build id stops the ramp."""
    if not 0 <= percentage <= 100:
        raise InvalidArgument("Percentage must be between 0 and 100 (inclusive)")
    now = clock.now()
    with transaction.atomic():
        deployment = _locked(namespace_id, name, token)
        previous, previous_percentage = deployment.ramping_build_id, deployment.ramping_percentage
        if build_id and build_id == deployment.current_build_id:
            raise FailedPrecondition(f"Ramping version {version_string(name, build_id)} is already current")
        if build_id == previous and (not build_id or percentage == previous_percentage):
            return RoutingChange(deployment, previous, previous_percentage)
        if build_id and build_id != previous:
            version = _version_row(deployment, build_id)
            _activate(version, now)
            version.ramping_since = now
            version.save()
            deployment.ramping_changed_at = now
        _check_manager(deployment, identity)
        deployment.ramping_build_id = build_id
        deployment.ramping_percentage = percentage if build_id else 0.0
        deployment.ramping_percentage_changed_at = now
        if not build_id:
            deployment.ramping_changed_at = now
        _deactivate(deployment, previous if previous != build_id else "", now)
        _bump(deployment, identity)
        return RoutingChange(deployment, previous, previous_percentage)


def _bump(deployment: WorkerDeployment, identity: str) -> None:
    deployment.revision += 1
    deployment.last_modifier_identity = identity
    deployment.save()
    # Tasks that waited for another version may now be for the pollers waiting on these queues.
    queues = deployment.task_queues.values_list("task_queue", flat=True)
    keys = {
        notify.task_queue_key(deployment.namespace_id, kind, q): _WAKE_POLLERS
        for q in queues
        for kind in (TaskKind.WORKFLOW, TaskKind.ACTIVITY)
    }
    notify.publish_on_commit(keys)


# --- deletion and metadata --------------------------------------------------------------------------


def delete_version(namespace_id: uuid.UUID, ref: Ref, *, skip_drainage: bool, identity: str = "") -> None:
    """Forget a version that is neither routed to nor polled (nor draining, unless `skip_drainage`)."""
    with transaction.atomic():
        version = get_version(namespace_id, ref)
        deployment = version.deployment
        text = version_string(ref.deployment_name, ref.build_id)
        if version.build_id in (deployment.current_build_id, deployment.ramping_build_id):
            raise FailedPrecondition(f"version '{text}' cannot be deleted since it is current or ramping")
        _check_manager(deployment, identity)
        if not skip_drainage and version.last_deactivation_at is not None and version.drained_at is None:
            raise FailedPrecondition(f"version '{text}' cannot be deleted since it is draining")
        if version.last_poll_at is not None and version.last_poll_at > clock.now() - ACTIVE_POLLER_WINDOW:
            raise FailedPrecondition(f"version '{text}' cannot be deleted since it has active pollers")
        version.delete()
    forget_seen()


def delete_deployment(namespace_id: uuid.UUID, name: str) -> None:
    with transaction.atomic():
        deployment = get_deployment(namespace_id, name)
        if deployment.versions.exists():
            raise FailedPrecondition("deployment has versions, can't be deleted")
        deployment.delete()
    forget_seen()
    task_routing.forget_deployments(namespace_id)


def metadata(version: WorkerDeploymentVersion) -> VersionMetadata:
    return VersionMetadata.FromString(bytes(version.metadata))


def update_metadata(
    namespace_id: uuid.UUID, ref: Ref, upsert: VersionMetadata, remove: list[str], identity: str
) -> VersionMetadata:
    with transaction.atomic():
        version = get_version(namespace_id, ref)
        current = metadata(version)
        for key, value in upsert.entries.items():
            current.entries[key].CopyFrom(value)
        for key in remove:
            current.entries.pop(key, None)
        version.metadata = current.SerializeToString()
        version.last_modifier_identity = identity
        version.save(update_fields=["metadata", "last_modifier_identity"])
        return current
