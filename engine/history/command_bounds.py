"""Durations, names and retry policies of workflow commands, checked as Temporal's command_attr_validator does.

A bad command is not a bad request: Temporal fails the workflow task with the command's BAD_*_ATTRIBUTES
cause (the run goes on, and the worker sees why), so these raise CommandFailure. Values too large are not
errors: engine/bounds.py has already capped every duration of the request at 100 years, as Temporal caps them.
"""

from __future__ import annotations

from google.protobuf.duration_pb2 import Duration
from temporalio.api.command.v1 import (
    Command,
    ContinueAsNewWorkflowExecutionCommandAttributes,
    StartChildWorkflowExecutionCommandAttributes,
)
from temporalio.api.enums.v1 import CommandType, WorkflowTaskFailedCause

from engine.bounds import MAX_ID_LENGTH, duration_problem
from engine.history import cron, retry
from engine.history.errors import CommandFailure

_Cause = WorkflowTaskFailedCause


def check(command: Command) -> None:
    """Raises CommandFailure with the command's cause for a duration, name or retry policy Temporal refuses."""
    kind = command.command_type
    if kind == CommandType.COMMAND_TYPE_START_TIMER:
        timer = command.start_timer_command_attributes
        _durations(
            _Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES,
            [("StartToFireTimeout", timer.start_to_fire_timeout)],
            "An invalid {name} is set on StartTimerCommand: {problem}.",
            f" TimerId={timer.timer_id[:100]}",
        )
    elif kind == CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK:
        activity = command.schedule_activity_task_command_attributes
        _durations(
            _Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES,
            [
                ("ScheduleToCloseTimeout", activity.schedule_to_close_timeout),
                ("ScheduleToStartTimeout", activity.schedule_to_start_timeout),
                ("StartToCloseTimeout", activity.start_to_close_timeout),
                ("HeartbeatTimeout", activity.heartbeat_timeout),
            ],
            "invalid {name}: {problem}",
        )
    elif kind == CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION:
        child = command.start_child_workflow_execution_command_attributes
        cause = _Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_CHILD_EXECUTION_ATTRIBUTES
        _durations(
            cause,
            [
                ("WorkflowExecutionTimeout", child.workflow_execution_timeout),
                ("WorkflowRunTimeout", child.workflow_run_timeout),
                ("WorkflowTaskTimeout", child.workflow_task_timeout),
            ],
            "Invalid {name} on StartChildWorkflowExecutionCommand: {problem}.",
            f" WorkflowId={child.workflow_id[:100]} WorkflowType={child.workflow_type.name[:100]}",
        )
        _retry_policy(cause, child)
    elif kind == CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION:
        continued = command.continue_as_new_workflow_execution_command_attributes
        cause = _Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_CONTINUE_AS_NEW_ATTRIBUTES
        _durations(
            cause,
            [
                ("WorkflowRunTimeout", continued.workflow_run_timeout),
                ("WorkflowTaskTimeout", continued.workflow_task_timeout),
                ("BackoffStartInterval", continued.backoff_start_interval),
            ],
            "Invalid {name} on ContinueAsNewWorkflowExecutionCommand: {problem}.",
            f" WorkflowType={continued.workflow_type.name[:100]}",
        )
        _retry_policy(cause, continued)
        if continued.cron_schedule:
            # The next run would compute its successor's start from it when it closes, and raise there.
            try:
                cron.validate(continued.cron_schedule)
            except cron.CronError as e:
                raise CommandFailure(cause, f"Invalid CronSchedule: {e}") from None
    elif kind == CommandType.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        upsert = command.upsert_workflow_search_attributes_command_attributes
        if not upsert.search_attributes.indexed_fields:
            raise CommandFailure(
                _Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES,
                ("IndexedFields" if upsert.HasField("search_attributes") else "SearchAttributes")
                + " is not set on UpsertWorkflowSearchAttributesCommand.",
            )
    elif kind == CommandType.COMMAND_TYPE_MODIFY_WORKFLOW_PROPERTIES:
        modify = command.modify_workflow_properties_command_attributes
        if not modify.upserted_memo.fields:
            raise CommandFailure(
                _Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_MODIFY_WORKFLOW_PROPERTIES_ATTRIBUTES,
                ("UpsertedMemo.Fields" if modify.HasField("upserted_memo") else "UpsertedMemo")
                + " is not set on ModifyWorkflowPropertiesCommand.",
            )
    elif kind == CommandType.COMMAND_TYPE_RECORD_MARKER:
        name = command.record_marker_command_attributes.marker_name
        if len(name) > MAX_ID_LENGTH:
            raise CommandFailure(
                _Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_RECORD_MARKER_ATTRIBUTES,
                "MarkerName on RecordMarkerCommand exceeds length limit. "
                f"MarkerName={name[:100]}... Length={len(name)} Limit={MAX_ID_LENGTH}",
            )


def _durations(cause: int, fields: list[tuple[str, Duration]], template: str, context: str = "") -> None:
    """`template` is ours ({name} and {problem} filled in); `context` carries the command's own ids, as is."""
    for name, value in fields:
        problem = duration_problem(value)
        if problem:
            raise CommandFailure(cause, template.format(name=name, problem=problem) + context)


def _retry_policy(
    cause: int,
    attrs: StartChildWorkflowExecutionCommandAttributes | ContinueAsNewWorkflowExecutionCommandAttributes,
) -> None:
    if attrs.HasField("retry_policy"):
        try:
            retry.normalized(attrs.retry_policy)
        except retry.RetryPolicyError as e:
            raise CommandFailure(cause, str(e)) from None
