"""Commands of a completed workflow task, each turned into its events by one handler."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from temporalio.api.command.v1 import Command
from temporalio.api.common.v1 import Memo, SearchAttributes
from temporalio.api.enums.v1 import CommandType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import (
    MarkerRecordedEventAttributes,
    UpsertWorkflowSearchAttributesEventAttributes,
    WorkflowPropertiesModifiedEventAttributes,
)
from temporalio.api.workflowservice.v1 import RespondWorkflowTaskCompletedRequest

from engine.history import (
    activity,
    activity_cancel,
    children,
    command_bounds,
    lifecycle,
    subjects,
    timer,
    updates,
)
from engine.history.errors import CommandFailure
from engine.history.events import new_event
from engine.history.mutation import Mutation

_CLOSE_COMMANDS = {
    CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
    CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
    CommandType.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION,
    CommandType.COMMAND_TYPE_CANCEL_WORKFLOW_EXECUTION,
}


@dataclass(slots=True)
class Outcome:
    needs_workflow_task: bool = False
    """A command's effect must be seen by the workflow at once (an activity cancelled before it started)."""
    eager_activities: list[int] = field(default_factory=list)
    """Scheduled event ids of activities the worker asked to run itself (request_eager_execution)."""


def apply_all(
    m: Mutation, *, completed_event_id: int, request: RespondWorkflowTaskCompletedRequest
) -> Outcome:
    """Apply the commands in order.

    Raises:
        CommandFailure: a command is invalid, or closes the run while new events wait to be seen.
    """
    outcome = Outcome()
    context = _Context(completed_event_id=completed_event_id, identity=request.identity, outcome=outcome)
    had_buffered = bool(m.state.buffered)
    messages = {message.id: message for message in request.messages}
    for command in request.commands:
        if not m.state.running:
            break  # Temporal keeps the first close command and ignores what follows it.
        kind = command.command_type
        if kind in _CLOSE_COMMANDS and had_buffered:
            raise CommandFailure(
                WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
                "UnhandledCommand",
            )
        if kind == CommandType.COMMAND_TYPE_PROTOCOL_MESSAGE:
            # The command orders its message among the other commands' events.
            message = messages.pop(command.protocol_message_command_attributes.message_id, None)
            if message is None:
                raise CommandFailure(
                    WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE,
                    f"ProtocolMessageCommand refers to unknown message {command.protocol_message_command_attributes.message_id!r}",
                )
            updates.handle_message(m, message, completed_event_id=completed_event_id)
            continue
        command_bounds.check(command)
        first_new = len(m.events)
        _apply(m, command, context)
        if command.HasField("user_metadata") and len(m.events) > first_new:
            # The command's summary and details travel on the event it produced (e.g. a timer's summary).
            m.events[first_new].user_metadata.CopyFrom(command.user_metadata)
    for message in messages.values():
        if m.state.running:
            updates.handle_message(m, message, completed_event_id=completed_event_id)
    return outcome


@dataclass(frozen=True, slots=True)
class _Context:
    """What every command handler gets besides the run and its command."""

    completed_event_id: int
    identity: str
    outcome: Outcome


def _schedule_activity(m: Mutation, command: Command, ctx: _Context) -> None:
    attrs = command.schedule_activity_task_command_attributes
    scheduled_event_id = activity.schedule(m, completed_event_id=ctx.completed_event_id, attrs=attrs)
    if attrs.request_eager_execution:
        ctx.outcome.eager_activities.append(scheduled_event_id)


def _request_cancel_activity(m: Mutation, command: Command, ctx: _Context) -> None:
    if activity_cancel.request_cancel(
        m,
        completed_event_id=ctx.completed_event_id,
        scheduled_event_id=command.request_cancel_activity_task_command_attributes.scheduled_event_id,
        identity=ctx.identity,
    ):
        ctx.outcome.needs_workflow_task = True


def _start_timer(m: Mutation, command: Command, ctx: _Context) -> None:
    timer.start(m, completed_event_id=ctx.completed_event_id, attrs=command.start_timer_command_attributes)


def _cancel_timer(m: Mutation, command: Command, ctx: _Context) -> None:
    timer.cancel(
        m,
        completed_event_id=ctx.completed_event_id,
        attrs=command.cancel_timer_command_attributes,
        identity=ctx.identity,
    )


def _complete_workflow(m: Mutation, command: Command, ctx: _Context) -> None:
    lifecycle.complete(
        m,
        completed_event_id=ctx.completed_event_id,
        attrs=command.complete_workflow_execution_command_attributes,
    )


def _fail_workflow(m: Mutation, command: Command, ctx: _Context) -> None:
    lifecycle.fail(
        m, completed_event_id=ctx.completed_event_id, attrs=command.fail_workflow_execution_command_attributes
    )


def _cancel_workflow(m: Mutation, command: Command, ctx: _Context) -> None:
    lifecycle.cancel(
        m,
        completed_event_id=ctx.completed_event_id,
        attrs=command.cancel_workflow_execution_command_attributes,
    )


def _continue_as_new(m: Mutation, command: Command, ctx: _Context) -> None:
    m.continued = lifecycle.continue_as_new(
        m,
        completed_event_id=ctx.completed_event_id,
        attrs=command.continue_as_new_workflow_execution_command_attributes,
        new_run_id=m.ids.run_id(),
    )


def _start_child(m: Mutation, command: Command, ctx: _Context) -> None:
    children.start_child(
        m,
        completed_event_id=ctx.completed_event_id,
        attrs=command.start_child_workflow_execution_command_attributes,
    )


def _signal_external(m: Mutation, command: Command, ctx: _Context) -> None:
    children.signal_external(
        m,
        completed_event_id=ctx.completed_event_id,
        attrs=command.signal_external_workflow_execution_command_attributes,
    )


def _request_cancel_external(m: Mutation, command: Command, ctx: _Context) -> None:
    children.request_cancel_external(
        m,
        completed_event_id=ctx.completed_event_id,
        attrs=command.request_cancel_external_workflow_execution_command_attributes,
    )


def _record_marker(m: Mutation, command: Command, ctx: _Context) -> None:
    attrs = command.record_marker_command_attributes
    if not attrs.marker_name:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_RECORD_MARKER_ATTRIBUTES,
            "MarkerName is not set on RecordMarkerCommand.",
        )
    m.add(
        new_event(
            MarkerRecordedEventAttributes(
                marker_name=attrs.marker_name,
                details=attrs.details,
                workflow_task_completed_event_id=ctx.completed_event_id,
                header=attrs.header if attrs.HasField("header") else None,
                failure=attrs.failure if attrs.HasField("failure") else None,
            )
        )
    )


def _upsert_search_attributes(m: Mutation, command: Command, ctx: _Context) -> None:
    attrs = command.upsert_workflow_search_attributes_command_attributes
    if not subjects.upsert_keeps_subject(m.state.search_attributes, attrs.search_attributes):
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES,
            f"{subjects.DATA_SUBJECT} is set when a run starts and cannot be set, changed or removed "
            "by an upsert: the run's payloads are sealed under its subject's key from the start.",
        )
    m.state.search_attributes = merged_search_attributes(m.state.search_attributes, attrs.search_attributes)
    m.add(
        new_event(
            UpsertWorkflowSearchAttributesEventAttributes(
                workflow_task_completed_event_id=ctx.completed_event_id,
                search_attributes=attrs.search_attributes,
            )
        )
    )


def _modify_properties(m: Mutation, command: Command, ctx: _Context) -> None:
    attrs = command.modify_workflow_properties_command_attributes
    m.state.memo = merged_memo(m.state.memo, attrs.upserted_memo)
    m.add(
        new_event(
            WorkflowPropertiesModifiedEventAttributes(
                workflow_task_completed_event_id=ctx.completed_event_id, upserted_memo=attrs.upserted_memo
            )
        )
    )


_Handler = Callable[[Mutation, Command, _Context], None]

HANDLERS: Mapping[int, _Handler] = MappingProxyType(
    {
        CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK: _schedule_activity,
        CommandType.COMMAND_TYPE_REQUEST_CANCEL_ACTIVITY_TASK: _request_cancel_activity,
        CommandType.COMMAND_TYPE_START_TIMER: _start_timer,
        CommandType.COMMAND_TYPE_CANCEL_TIMER: _cancel_timer,
        CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION: _complete_workflow,
        CommandType.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION: _fail_workflow,
        CommandType.COMMAND_TYPE_CANCEL_WORKFLOW_EXECUTION: _cancel_workflow,
        CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION: _continue_as_new,
        CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION: _start_child,
        CommandType.COMMAND_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION: _signal_external,
        CommandType.COMMAND_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION: _request_cancel_external,
        CommandType.COMMAND_TYPE_RECORD_MARKER: _record_marker,
        CommandType.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: _upsert_search_attributes,
        CommandType.COMMAND_TYPE_MODIFY_WORKFLOW_PROPERTIES: _modify_properties,
    }
)
"""One handler per command type, as Temporal's handleCommand* functions; a protocol message command is
ordered by apply_all itself (it carries no attributes of its own, only a message to find)."""


def _apply(m: Mutation, command: Command, ctx: _Context) -> None:
    kind = command.command_type
    handler = HANDLERS.get(kind)
    if handler is not None:
        handler(m, command, ctx)
    elif kind not in CommandType.values():
        # A number no CommandType names (proto3 enums are open): Temporal's words, not a ValueError from Name().
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
            f"unknown command type: {kind}",
        )
    else:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
            f"Perdura does not support the {CommandType.Name(kind)} command yet",
        )


def merged_search_attributes(current: bytes, upsert: SearchAttributes) -> bytes:
    """A run's search attributes after an upsert; an empty value (null, or an empty list) removes it."""
    merged = SearchAttributes.FromString(current) if current else SearchAttributes()
    for key, value in upsert.indexed_fields.items():
        if value.data in (b"", b"null", b"[]"):
            merged.indexed_fields.pop(key, None)
        else:
            merged.indexed_fields[key].CopyFrom(value)
    return merged.SerializeToString()


def merged_memo(current: bytes, upsert: Memo) -> bytes:
    """A run's memo after ModifyWorkflowProperties; an empty value removes the field."""
    merged = Memo.FromString(current) if current else Memo()
    for key, value in upsert.fields.items():
        if value.data in (b"", b"null"):
            merged.fields.pop(key, None)
        else:
            merged.fields[key].CopyFrom(value)
    return merged.SerializeToString()
