"""Worker versioning on a run: what a completed workflow task declares about its worker's version.

A versioned worker (deployment options in VERSIONED mode) names its deployment version and the run's
versioning behaviour on each completion; Temporal writes both on the WorkflowTaskCompleted event and
keeps them on the run. A worker that is not versioned gets no behaviour, even when its SDK reports a
default one (as Temporal, which drops it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from temporalio.api.common.v1 import WorkerVersionStamp
from temporalio.api.deployment.v1 import WorkerDeploymentVersion
from temporalio.api.enums.v1 import ContinueAsNewVersioningBehavior, VersioningBehavior, WorkerVersioningMode
from temporalio.api.history.v1 import WorkflowExecutionStartedEventAttributes
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionVersioningInfo
from temporalio.api.workflowservice.v1 import RespondWorkflowTaskCompletedRequest

from engine.errors import InvalidArgument
from engine.history.state import MutableState

VERSIONED = WorkerVersioningMode.WORKER_VERSIONING_MODE_VERSIONED
UNSPECIFIED = VersioningBehavior.VERSIONING_BEHAVIOR_UNSPECIFIED
PINNED = VersioningBehavior.VERSIONING_BEHAVIOR_PINNED
AUTO_UPGRADE = VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE


@dataclass(frozen=True, slots=True)
class Declared:
    """The versioning fields of one workflow task completion."""

    deployment_name: str = ""
    version: WorkerDeploymentVersion | None = None
    behavior: int = UNSPECIFIED
    stamp: WorkerVersionStamp | None = None


def declared(request: RespondWorkflowTaskCompletedRequest) -> Declared:
    stamp = request.worker_version_stamp if request.HasField("worker_version_stamp") else None
    options = request.deployment_options if request.HasField("deployment_options") else None
    if options is None:
        return Declared(stamp=stamp)
    versioned = options.worker_versioning_mode == VERSIONED
    if stamp is None and options.build_id:
        # The SDKs stamp completions only for a server that advertises build-id versioning (the older
        # API, which Perdura does not serve); the build id they report is the same, so the event is too.
        stamp = WorkerVersionStamp(build_id=options.build_id, use_versioning=versioned)
    if not versioned:
        return Declared(deployment_name=options.deployment_name, stamp=stamp)
    version = None
    if options.deployment_name and options.build_id:
        version = WorkerDeploymentVersion(deployment_name=options.deployment_name, build_id=options.build_id)
    return Declared(options.deployment_name, version, request.versioning_behavior, stamp)


def record(state: MutableState, fields: Declared) -> None:
    """Keep what the completion declared on the run (an unversioned completion clears it); a one-time
    override is fulfilled, and clears, when the task completed on its version."""
    if state.override_one_time and fields.version is not None:
        target = (state.override_deployment_name, state.override_build_id)
        if (fields.version.deployment_name, fields.version.build_id) == target:
            clear_override(state)
    state.use_ramping = False
    state.versioning_behavior = int(fields.behavior)
    state.deployment_name = fields.version.deployment_name if fields.version is not None else ""
    state.deployment_build_id = fields.version.build_id if fields.version is not None else ""
    state.worker_deployment_name = fields.deployment_name


def validate_override(override: VersioningOverride) -> None:
    """A start's versioning override, checked as Temporal checks it (its messages).

    Raises:
        InvalidArgument: the override is incomplete.
    """
    which = override.WhichOneof("override")
    if which == "auto_upgrade":
        if not override.auto_upgrade:
            raise InvalidArgument("auto-upgrade override must be true")
        return
    if which == "pinned":
        if not override.pinned.HasField("version"):
            raise InvalidArgument("must provide version if override is pinned.")
        if not override.pinned.behavior:
            raise InvalidArgument("must specify pinned override behavior if override is pinned.")
        version = override.pinned.version
        if not version.deployment_name or not version.build_id:
            raise InvalidArgument("pinned override version needs a deployment name and a build id")
        return
    if which == "one_time":
        target = override.one_time.target_deployment_version
        if not override.one_time.HasField("target_deployment_version"):
            raise InvalidArgument("must provide target deployment version if override is one-time.")
        if not target.deployment_name or not target.build_id:
            raise InvalidArgument("one-time override version needs a deployment name and a build id")
        return
    if override.behavior == PINNED:
        if not override.pinned_version and not override.HasField("deployment"):
            raise InvalidArgument(
                "must provide deployment (deprecated) or pinned version if behavior is 'PINNED'"
            )
    elif override.behavior != AUTO_UPGRADE:
        raise InvalidArgument("override behavior is required")


def apply_override(state: MutableState, override: VersioningOverride) -> None:
    """Keep a (validated) override on the run: it decides the run's routing over what workers declare."""
    target = pinned_target(override)
    clear_override(state)
    if target is None:
        state.override_behavior = int(AUTO_UPGRADE)
    else:
        state.override_behavior = int(PINNED)
        state.override_deployment_name, state.override_build_id = target
        state.override_one_time = override.WhichOneof("override") == "one_time"


def info(state: MutableState) -> WorkflowExecutionVersioningInfo | None:
    """DescribeWorkflowExecution's versioning info: the version and behaviour of the run's last completed
    task, and its override; None for a run no versioned worker has run and no override routes."""
    if not state.deployment_build_id and not state.override_behavior:
        return None
    result = WorkflowExecutionVersioningInfo(behavior=state.versioning_behavior)  # type: ignore[arg-type]
    if state.deployment_build_id:
        result.deployment_version.deployment_name = state.deployment_name
        result.deployment_version.build_id = state.deployment_build_id
        result.version = f"{state.deployment_name}.{state.deployment_build_id}"
    override = override_of(state)
    if override is not None:
        result.versioning_override.CopyFrom(override)
        # Describe fills in the deprecated (v0.31) fields too, as Temporal does for older clients.
        if state.override_behavior == PINNED:
            result.versioning_override.behavior = PINNED
            result.versioning_override.pinned_version = (
                f"{state.override_deployment_name}.{state.override_build_id}"
            )
        else:
            result.versioning_override.behavior = AUTO_UPGRADE
    return result


def override_of(state: MutableState) -> VersioningOverride | None:
    """The run's override as the API shows it (None: no override)."""
    if state.override_behavior == PINNED and state.override_one_time:
        override = VersioningOverride()
        override.one_time.target_deployment_version.deployment_name = state.override_deployment_name
        override.one_time.target_deployment_version.build_id = state.override_build_id
        return override
    if state.override_behavior == PINNED:
        override = VersioningOverride()
        override.pinned.behavior = VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED
        override.pinned.version.deployment_name = state.override_deployment_name
        override.pinned.version.build_id = state.override_build_id
        return override
    if state.override_behavior == AUTO_UPGRADE:
        return VersioningOverride(auto_upgrade=True)
    return None


def clear_override(state: MutableState) -> None:
    state.override_behavior = 0
    state.override_deployment_name = ""
    state.override_build_id = ""
    state.override_one_time = False


def effective_version(state: MutableState) -> tuple[int, str, str]:
    """The behaviour and (deployment, build id) in force: the override's, else what the last task declared."""
    if state.override_behavior == PINNED:
        return PINNED, state.override_deployment_name, state.override_build_id
    if state.override_behavior == AUTO_UPGRADE:
        return AUTO_UPGRADE, state.deployment_name, state.deployment_build_id
    return state.versioning_behavior, state.deployment_name, state.deployment_build_id


def pinned_target(override: VersioningOverride) -> tuple[str, str] | None:
    """The (deployment, build id) a validated pinning override names; None for auto-upgrade."""
    which = override.WhichOneof("override")
    if which == "pinned":
        return override.pinned.version.deployment_name, override.pinned.version.build_id
    if which == "one_time":
        target = override.one_time.target_deployment_version
        return target.deployment_name, target.build_id
    if which == "auto_upgrade" or override.behavior == AUTO_UPGRADE:
        return None
    if override.HasField("deployment"):
        return override.deployment.series_name, override.deployment.build_id
    name, _, build_id = override.pinned_version.replace(":", ".", 1).partition(".")
    return name, build_id


def continue_as_new(old: MutableState, new: MutableState, initial: int) -> None:
    """What a run continued as new keeps of its versioning (Temporal's rules).

    A pinned run's next run stays on its version on the same task queue, unless the command asks for
    AUTO_UPGRADE (it starts unpinned, on the current version) or USE_RAMPING_VERSION (on the ramping one);
    an override is kept as it was.
    """
    if not old.override_one_time:  # a one-time override is the run's own, as on Temporal
        new.override_behavior = old.override_behavior
        new.override_deployment_name = old.override_deployment_name
        new.override_build_id = old.override_build_id
    if initial == ContinueAsNewVersioningBehavior.CONTINUE_AS_NEW_VERSIONING_BEHAVIOR_USE_RAMPING_VERSION:
        new.use_ramping = True
        new.deployment_name = old.deployment_name
        return
    if initial == ContinueAsNewVersioningBehavior.CONTINUE_AS_NEW_VERSIONING_BEHAVIOR_AUTO_UPGRADE:
        new.deployment_name = old.deployment_name
        return
    if old.versioning_behavior == PINNED and new.task_queue == old.task_queue:
        new.versioning_behavior = old.versioning_behavior
        new.deployment_name = old.deployment_name
        new.deployment_build_id = old.deployment_build_id
        new.inherited_pinned = True


def carried_to_retry_or_cron(state: MutableState, *, retry: bool) -> Inherited | None:
    """What the next run of a retry or cron chain keeps of the run's versioning (Temporal's rules): a
    pinning override always; on a retry, also the pinned version the run itself inherited (a child of a
    pinned parent, or a pinned run's continuation) while it is still pinned to it. A cron run inherits no
    version. Both stay on the run's task queue, so no version needs checking."""
    pinning = state.override_behavior == PINNED and not state.override_one_time
    override = override_of(state) if pinning else None
    pinned = None
    if retry and state.inherited_pinned:
        behavior, name, build_id = effective_version(state)
        if behavior == PINNED and build_id:
            pinned = WorkerDeploymentVersion(deployment_name=name, build_id=build_id)
    if pinned is None and override is None:
        return None
    return Inherited(pinned, override)


VersionInQueue = Callable[[str, str, str], bool]
"""Whether (task queue, deployment name, build id) names a version whose workers poll that queue."""


@dataclass(frozen=True, slots=True)
class Inherited:
    """What a child run takes of its parent's versioning."""

    pinned: WorkerDeploymentVersion | None
    override: VersioningOverride | None


def inherited_by_child(
    parent: MutableState, child_task_queue: str, version_in_queue: VersionInQueue
) -> Inherited | None:
    """Temporal's rule: a child of a pinned parent starts pinned to the parent's version, and takes the
    parent's pinning override, when its task queue is the parent's or belongs to that version."""
    behavior, name, build_id = effective_version(parent)
    if behavior != PINNED or not build_id:
        return None
    if child_task_queue != parent.task_queue and not version_in_queue(child_task_queue, name, build_id):
        return None
    pinning = parent.override_behavior == PINNED and not parent.override_one_time
    override = override_of(parent) if pinning else None
    return Inherited(WorkerDeploymentVersion(deployment_name=name, build_id=build_id), override)


def apply_inherited(
    state: MutableState, attrs: WorkflowExecutionStartedEventAttributes, inherited: Inherited
) -> None:
    """Record a child's inheritance on its start event and start it where its parent runs."""
    if inherited.pinned is not None:
        attrs.inherited_pinned_version.CopyFrom(inherited.pinned)
        state.inherited_pinned = True
        state.versioning_behavior = PINNED
        state.deployment_name = inherited.pinned.deployment_name
        state.deployment_build_id = inherited.pinned.build_id
    if inherited.override is not None:
        attrs.versioning_override.CopyFrom(inherited.override)
        apply_override(state, inherited.override)
