"""UpdateWorkflowExecutionOptions: the run's options an operator may change, and the event that records it.

Temporal 1.32's options are a versioning override, a priority and a time-skipping config. Perdura serves
the first two (Temporal's service/history/api/updateworkflowoptions): the priority is recorded, shown by
describe and carried to the next run; the override decides where the run's next workflow tasks go
(engine/services/task_routing.py). A time-skipping config is refused when set, since Perdura has no time
skipping; clearing it is accepted, as there is nothing to clear.
"""

from __future__ import annotations

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.common.v1 import Priority
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.history.v1 import (
    WorkflowExecutionOptionsUpdatedEventAttributes,
    WorkflowExecutionStartedEventAttributes,
)
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions

from engine.errors import FailedPrecondition, InvalidArgument, Unimplemented
from engine.history import versioning, versioning_attributes
from engine.history.errors import require_running
from engine.history.events import new_event
from engine.history.mutation import Mutation
from engine.history.state import MutableState

TIME_SKIPPING_UNSERVED = (
    "Perdura does not implement time skipping, so a time_skipping_config cannot be set "
    "(only priority and versioning_override can be updated)."
)
_DEPRECATED_PAIR = {"versioning_override.behavior", "versioning_override.deployment"}


def current(state: MutableState) -> WorkflowExecutionOptions:
    """The options in force: the run's versioning override and priority, where it has them."""
    options = WorkflowExecutionOptions()
    override = versioning.override_of(state)
    if override is not None:
        options.versioning_override.CopyFrom(override)
    if state.start_attrs:
        started = WorkflowExecutionStartedEventAttributes.FromString(state.start_attrs)
        if started.HasField("priority"):
            options.priority.CopyFrom(started.priority)
    return options


def _requested_override(state: MutableState, options: WorkflowExecutionOptions) -> VersioningOverride | None:
    """The requested override, a pinned one without a version given the run's own (as Temporal does)."""
    if not options.HasField("versioning_override"):
        return None
    override = VersioningOverride()
    override.CopyFrom(options.versioning_override)
    pinned = override.pinned
    if override.WhichOneof("override") == "pinned" and pinned.behavior and not pinned.HasField("version"):
        behavior, name, build_id = versioning.effective_version(state)
        if behavior != versioning.PINNED:
            raise FailedPrecondition(
                "must specify a specific pinned override version because workflow with id "
                f"{state.workflow_id} has behavior {_go_name(behavior)} and is not yet pinned to any version"
            )
        pinned.version.deployment_name, pinned.version.build_id = name, build_id
    return override


def _go_name(behavior: int) -> str:
    """A behaviour as Temporal's Go enums print it: VERSIONING_BEHAVIOR_AUTO_UPGRADE is AutoUpgrade."""
    name = VersioningBehavior.Name(behavior).removeprefix("VERSIONING_BEHAVIOR_")  # type: ignore[arg-type]
    return "".join(part.capitalize() for part in name.split("_"))


def _check_paths(paths: list[str]) -> None:
    nested = {p for p in paths if p.startswith("versioning_override.")}
    if nested & _DEPRECATED_PAIR and not nested >= _DEPRECATED_PAIR:
        raise InvalidArgument(
            "error applying update_options: versioning_override fields must be updated together"
        )
    if nested - _DEPRECATED_PAIR:
        raise InvalidArgument(
            "error applying update_options: versioning_override doesn't support partial updates"
        )


def update(
    m: Mutation,
    *,
    options: WorkflowExecutionOptions,
    paths: list[str],
    identity: str,
    version_in_queue: versioning.VersionInQueue,
) -> WorkflowExecutionOptions:
    """Merge the masked fields of `options` into the run's and record a change; returns the merged options.

    A merge that changes nothing writes nothing, as in Temporal.

    Raises:
        RunClosed: the run is closed.
        InvalidArgument: the override is incomplete, or the mask names part of it.
        FailedPrecondition: a pinned override names no version and the run is pinned to none, or names a
            version whose workers do not poll the run's task queue.
        Unimplemented: a time-skipping config.
    """
    state = m.state
    require_running(state)
    requested = WorkflowExecutionOptions()
    requested.CopyFrom(options)
    override = _requested_override(state, options)
    if override is not None:
        requested.versioning_override.CopyFrom(override)
        if override.ByteSize():
            versioning.validate_override(override)
            target = versioning.pinned_target(override)
            if target is not None and not version_in_queue(state.task_queue, *target):
                raise FailedPrecondition(
                    f"Pinned version '{target[0]}:{target[1]}' is not present in task queue "
                    f"'{state.task_queue}' of type 'Workflow'"
                )
    _check_paths(paths)
    before = current(state)
    merged = WorkflowExecutionOptions()
    merged.CopyFrom(before)
    # A path naming a message replaces it whole (unset in `options`: cleared), as Go's fieldmask merge does.
    FieldMask(paths=paths).MergeMessage(requested, merged, replace_message_field=True)
    if merged.HasField("time_skipping_config") and merged.time_skipping_config.ByteSize():
        raise Unimplemented(TIME_SKIPPING_UNSERVED)
    merged.ClearField("time_skipping_config")
    if merged.HasField("versioning_override") and not merged.versioning_override.ByteSize():
        merged.ClearField("versioning_override")
    if merged == before:
        return merged
    has_override = merged.HasField("versioning_override")
    event = new_event(
        WorkflowExecutionOptionsUpdatedEventAttributes(
            versioning_override=merged.versioning_override if has_override else None,
            unset_versioning_override=not has_override,
            identity=identity,
            priority=merged.priority if merged.HasField("priority") else None,
        )
    )
    event.worker_may_ignore = True
    m.add_external(event)
    if has_override:
        versioning.apply_override(state, merged.versioning_override)
    else:
        versioning.clear_override(state)
    if versioning_attributes.index(state):
        m.search_attributes_changed = True
    _set_priority(state, merged.priority if merged.HasField("priority") else None)
    return merged


def _set_priority(state: MutableState, priority: Priority | None) -> None:
    """Kept on the start attributes, from which describe reads it and the next run inherits it."""
    started = WorkflowExecutionStartedEventAttributes.FromString(state.start_attrs)
    if priority is None:
        started.ClearField("priority")
    else:
        started.priority.CopyFrom(priority)
    state.start_attrs = started.SerializeToString()
