"""Drainage of worker deployment versions: when may a version's workers be shut down?

As on Temporal (Server 1.32): a version that stops being current or ramping is DRAINING. Once a grace
period has passed (visibility's lag behind the last runs routed to it), its open pinned runs are counted
(`TemporalWorkerDeploymentVersion = '<deployment>:<build id>' AND TemporalWorkflowVersioningBehavior =
'Pinned' AND ExecutionStatus = 'Running'`, the search attributes of engine/history/versioning_attributes.py),
then again at most once per refresh interval; at zero the version is DRAINED, and may be deleted without
`skip_drainage`. Becoming current or ramping again clears it. Temporal counts from a system workflow per
version; Perdura counts when someone reads the version (describe), as nothing else waits for the answer.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from perdura import clock
from temporalio.api.deployment.v1 import VersionDrainageInfo
from temporalio.api.enums.v1 import VersionDrainageStatus

from engine.history import versioning
from engine.history import versioning_attributes as attributes
from engine.models import WorkerDeployment, WorkerDeploymentVersion
from engine.proto_values import ts
from visibility import selectors


def pinned_runs_query(deployment_name: str, build_id: str) -> str:
    """The visibility filter of a version's open pinned runs (Temporal's own)."""
    version = attributes.version_string(deployment_name, build_id).replace("'", "\\'")
    pinned = attributes.BEHAVIOR_NAMES[versioning.PINNED]
    return (
        f"{attributes.VERSION} = '{version}' AND {attributes.BEHAVIOR} = '{pinned}' "
        "AND ExecutionStatus = 'Running'"
    )


def _draining(deployment: WorkerDeployment, version: WorkerDeploymentVersion) -> bool:
    routed = version.build_id in (deployment.current_build_id, deployment.ramping_build_id)
    return not routed and version.last_deactivation_at is not None and version.drained_at is None


def _due(version: WorkerDeploymentVersion, now: datetime) -> bool:
    assert version.last_deactivation_at is not None
    grace = timedelta(seconds=settings.PERDURA_VERSION_DRAINAGE_GRACE_SECONDS)
    refresh = timedelta(seconds=settings.PERDURA_VERSION_DRAINAGE_REFRESH_SECONDS)
    if now < version.last_deactivation_at + grace:
        return False
    return version.drainage_checked_at is None or now >= version.drainage_checked_at + refresh


def refresh(deployment: WorkerDeployment, version: WorkerDeploymentVersion) -> None:
    """Count a draining version's open pinned runs if a check is due, and keep what it found."""
    now = clock.now()
    if not _draining(deployment, version) or not _due(version, now):
        return
    count, _ = selectors.execution_count(
        namespace_id=deployment.namespace_id, query=pinned_runs_query(deployment.name, version.build_id)
    )
    version.drainage_checked_at = now
    if count == 0:
        version.drained_at = now
    # Only if it still drains: a routing change since the read above cleared it.
    WorkerDeploymentVersion.objects.filter(
        pk=version.pk, last_deactivation_at=version.last_deactivation_at, drained_at__isnull=True
    ).update(drainage_checked_at=version.drainage_checked_at, drained_at=version.drained_at)


def info(deployment: WorkerDeployment, version: WorkerDeploymentVersion) -> VersionDrainageInfo | None:
    """The version's drainage info (None while it is routed to, or never was)."""
    if version.build_id in (deployment.current_build_id, deployment.ramping_build_id):
        return None
    if version.last_deactivation_at is None:
        return None
    drained = version.drained_at is not None
    return VersionDrainageInfo(
        status=VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINED
        if drained
        else VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINING,
        last_changed_time=ts(version.drained_at if drained else version.last_deactivation_at),
        last_checked_time=ts(version.drainage_checked_at or version.last_deactivation_at),
    )
