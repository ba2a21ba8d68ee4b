"""Request validation shared by the RPCs: ids, names, durations and payload sizes, with actionable messages."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from temporalio.api.command.v1 import Command
from temporalio.api.common.v1 import Priority
from temporalio.api.enums.v1 import CommandType
from temporalio.api.workflowservice.v1 import (
    SignalWithStartWorkflowExecutionRequest,
    StartActivityExecutionRequest,
    StartWorkflowExecutionRequest,
)

from engine.bounds import BLOB_SIZE_LIMIT, MAX_ID_LENGTH, duration_problem
from engine.errors import InvalidArgument
from engine.history import cron, retry, retry_jitter, versioning
from visibility.divisions import is_activity_host

__all__ = ["BLOB_SIZE_LIMIT", "MAX_ID_LENGTH"]


def require_id(value: str, name: str) -> None:
    if not value:
        raise InvalidArgument(f"{name} is not set on request.")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgument(f"{name} exceeds maximum allowed length ({len(value)}/{MAX_ID_LENGTH})")
    if name == "WorkflowId" and is_activity_host(value):
        # The runs hosting standalone activities have such ids: no workflow call may reach them.
        raise InvalidArgument(f"{name} may not begin with the control character U+001F")


def run_id(value: str) -> None:
    """Run ids are UUIDs; an empty one means the current run."""
    if value:
        try:
            uuid.UUID(value)
        except ValueError:
            raise InvalidArgument("Invalid RunId.") from None


def require_task_queue(name: str) -> None:
    if not name:
        raise InvalidArgument("missing task queue name")
    if len(name) > MAX_ID_LENGTH:
        raise InvalidArgument(f"TaskQueue exceeds maximum allowed length ({len(name)}/{MAX_ID_LENGTH})")


def non_negative(value: Duration, name: str) -> None:
    """A timeout or delay Temporal accepts: not negative, seconds and nanos of one sign (its messages)."""
    problem = duration_problem(value)
    if problem:
        raise InvalidArgument(f"An invalid {name}Seconds is set on request. cause: {problem}")


def signal_name(value: str, *, with_start: bool = False) -> None:
    """Temporal words it differently for SignalWithStart (its own validator)."""
    if len(value) > MAX_ID_LENGTH:
        if with_start:
            raise InvalidArgument(
                f"signal name exceeds maximum allowed length ({len(value)}/{MAX_ID_LENGTH})"
            )
        raise InvalidArgument("SignalName length exceeds limit.")


def namespace_id(value: str) -> None:
    """Namespace ids are UUIDs; anything else names no namespace and is refused, not looked up."""
    if value:
        try:
            uuid.UUID(value)
        except ValueError:
            raise InvalidArgument(f"Invalid namespace id {value[:64]!r}: it must be a UUID.") from None


def blob_size(message: Message | None, name: str) -> None:
    if message is None:
        return
    size = message.ByteSize()
    if size > BLOB_SIZE_LIMIT:
        raise InvalidArgument(
            f"Blob data size exceeds limit. The {name} is {size} bytes; the limit is {BLOB_SIZE_LIMIT} bytes (2 MiB)."
        )


_SIZED = frozenset({"temporal.api.common.v1.Payloads", "temporal.api.common.v1.Memo"})
"""Held to the blob limit in commands: payloads, and memos (Temporal's limit.memoSize.error is also 2 MiB)."""


def command_payloads(command: Message) -> None:
    """Every payload a workflow command carries (input, result, details, marker details, memo) is within the
    limit."""
    which = command.WhichOneof("attributes")
    if not which:
        return
    for field, value in getattr(command, which).ListFields():
        if field.message_type is None:
            continue
        if field.message_type.full_name in _SIZED:
            blob_size(value, field.name)
        elif field.message_type.GetOptions().map_entry:
            for item in value.values():
                if (
                    getattr(item, "DESCRIPTOR", None) is not None
                    and item.DESCRIPTOR.full_name == "temporal.api.common.v1.Payloads"
                ):
                    blob_size(item, field.name)


_CLOSING = frozenset(
    {
        CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
        CommandType.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION,
        CommandType.COMMAND_TYPE_CANCEL_WORKFLOW_EXECUTION,
        CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
    }
)


def _command_name(kind: int) -> str:
    """A command type as Temporal's Go enums print it: COMMAND_TYPE_START_TIMER -> StartTimer."""
    if kind not in CommandType.values():
        return str(kind)
    words = CommandType.Name(CommandType.ValueType(kind)).removeprefix("COMMAND_TYPE_").split("_")
    return "".join(word.capitalize() for word in words)


def command_sequence(commands: Sequence[Command]) -> None:
    """A command that closes the run must be the last: what would follow it could never run. Temporal
    refuses the whole completion (the run stays open, the task times out and is retried), with these words."""
    for command in commands[:-1]:
        if command.command_type in _CLOSING:
            names = ", ".join(_command_name(c.command_type) for c in commands)
            raise InvalidArgument(
                f"invalid command sequence: [{names}], command {_command_name(command.command_type)} "
                "must be the last command."
            )


def retry_policy(message: Message, field: str = "retry_policy") -> None:
    if message.HasField(field):
        try:
            retry.normalized(getattr(message, field))
        except retry.RetryPolicyError as e:
            raise InvalidArgument(str(e)) from None


def start_request(request: StartWorkflowExecutionRequest | SignalWithStartWorkflowExecutionRequest) -> None:
    """Checks shared by StartWorkflowExecution and SignalWithStartWorkflowExecution."""
    require_id(request.workflow_id, "WorkflowId")
    if not request.HasField("task_queue"):
        raise InvalidArgument("taskQueue is not set")
    if not request.workflow_type.name:
        raise InvalidArgument("WorkflowType is not set on request.")
    if len(request.workflow_type.name) > MAX_ID_LENGTH:
        raise InvalidArgument("WorkflowType length exceeds limit.")
    require_task_queue(request.task_queue.name)
    if len(request.request_id) > MAX_ID_LENGTH:
        raise InvalidArgument("RequestId length exceeds limit.")
    non_negative(request.workflow_execution_timeout, "WorkflowExecutionTimeout")
    non_negative(request.workflow_run_timeout, "WorkflowRunTimeout")
    non_negative(request.workflow_task_timeout, "WorkflowTaskTimeout")
    retry_policy(request)
    jitter_problem = retry_jitter.header_problem(request.header if request.HasField("header") else None)
    if jitter_problem is not None:
        raise InvalidArgument(jitter_problem)
    if request.HasField("input"):
        blob_size(request.input, "input")
    if request.HasField("memo"):
        blob_size(request.memo, "memo")
    if request.cron_schedule:
        try:
            cron.validate(request.cron_schedule)
        except cron.CronError as e:
            raise InvalidArgument(f"Invalid CronSchedule: {e}") from None
    if request.HasField("versioning_override") and request.versioning_override.ByteSize():
        versioning.validate_override(request.versioning_override)
    if request.HasField("workflow_start_delay"):
        if request.cron_schedule:
            raise InvalidArgument("CronSchedule and WorkflowStartDelay may not be used together.")
        non_negative(request.workflow_start_delay, "WorkflowStartDelay")


def priority(value: Priority) -> None:
    """Temporal's priorities.Validate, with its messages."""
    if value.priority_key < 0:
        raise InvalidArgument("priority key can't be negative")
    if len(value.fairness_key) > 64:
        raise InvalidArgument("fairness key length exceeds limit")
    if value.fairness_weight < 0:
        raise InvalidArgument("must be greater than zero")


def activity_id(value: str) -> None:
    """A standalone activity's id (Temporal's messages)."""
    if not value:
        raise InvalidArgument("activity ID is required")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgument(f"activity ID exceeds length limit. Length={len(value)} Limit={MAX_ID_LENGTH}")


def activity_start_request(request: StartActivityExecutionRequest) -> None:
    """StartActivityExecution's checks before the activity rules' own (engine.history.standalone.start)."""
    activity_id(request.activity_id)
    if not request.activity_type.name:
        raise InvalidArgument("activityType is not set")
    if len(request.activity_type.name) > MAX_ID_LENGTH:
        raise InvalidArgument(
            f"activityType exceeds length limit. Length={len(request.activity_type.name)} Limit={MAX_ID_LENGTH}"
        )
    require_task_queue(request.task_queue.name)
    if len(request.request_id) > MAX_ID_LENGTH:
        raise InvalidArgument("RequestId length exceeds limit.")
    for field, name in (
        ("schedule_to_close_timeout", "ScheduleToCloseTimeout"),
        ("schedule_to_start_timeout", "ScheduleToStartTimeout"),
        ("start_to_close_timeout", "StartToCloseTimeout"),
        ("heartbeat_timeout", "HeartbeatTimeout"),
        ("start_delay", "StartDelay"),
    ):
        non_negative(getattr(request, field), name)
    retry_policy(request)
    if request.HasField("input"):
        blob_size(request.input, "input")
