"""The edge bounds (engine/bounds.py), command bounds and strict page tokens, as pure functions.

The expected caps and messages are the real Temporal server's (1.29, `temporal server start-dev`), where it
has them: durations capped to 100 years (3,153,600,000 s), nanos folded into seconds, its wording for
mixed-sign durations and over-long names; where it has none (headers, identities on starts, nesting), the
limits are ours and the README's "Request limits" section states them.
"""

from __future__ import annotations

import base64
import json
import math
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.command.v1 import (
    Command,
    ContinueAsNewWorkflowExecutionCommandAttributes,
    RecordMarkerCommandAttributes,
    ScheduleActivityTaskCommandAttributes,
    StartChildWorkflowExecutionCommandAttributes,
    StartTimerCommandAttributes,
)
from temporalio.api.common.v1 import Header, Payload, Priority, RetryPolicy
from temporalio.api.enums.v1 import CommandType, WorkflowTaskFailedCause
from temporalio.api.failure.v1 import Failure
from temporalio.api.schedule.v1 import ScheduleSpec
from temporalio.api.workflowservice.v1 import (
    CreateScheduleRequest,
    RegisterNamespaceRequest,
    RespondActivityTaskFailedRequest,
    RespondWorkflowTaskCompletedRequest,
    SignalWorkflowExecutionRequest,
    StartWorkflowExecutionRequest,
)

from engine import bounds, page_tokens
from engine.errors import InvalidArgument
from engine.history import command_bounds, retry
from engine.history.errors import CommandFailure

CAP = bounds.MAX_DURATION_SECONDS
DURATION_MAX = 315_576_000_000
Cause = WorkflowTaskFailedCause


def test_the_cap_is_temporals_100_years():
    assert CAP == 3_153_600_000


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ((5, 0), (5, 0)),
        ((10**12, 0), (CAP, 0)),
        ((DURATION_MAX, 999_999_999), (CAP, 0)),
        ((2**63 - 1, 0), (CAP, 0)),
        ((CAP, 1), (CAP, 0)),
        ((-(10**12), 0), (-CAP, 0)),
        ((1, 2_000_000_000), (3, 0)),  # Temporal's Go runtime reads 1 s + 2e9 ns as 3 s
        ((0, -1_500_000_000), (-1, -500_000_000)),
        ((5, -1), (5, -1)),  # in range: left for the field's own check (mixed signs)
    ],
)
def test_cap_duration(given, expected):
    value = Duration(seconds=given[0], nanos=given[1])
    bounds.cap_duration(value)
    assert (value.seconds, value.nanos) == expected
    datetime.now(UTC) + value.ToTimedelta()  # whatever is left, a deadline can be computed from it


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ((5, 0), None),
        ((0, 0), None),
        ((-5, 0), "negative duration"),
        ((0, -1), "negative duration"),
        ((5, -1), "duration has seconds and nanos with different signs"),
        ((-5, 1), "duration has seconds and nanos with different signs"),
    ],
)
def test_duration_problem_in_temporals_words(given, problem):
    assert bounds.duration_problem(Duration(seconds=given[0], nanos=given[1])) == problem


def test_request_durations_are_capped_in_place_wherever_they_are():
    request = StartWorkflowExecutionRequest(
        workflow_execution_timeout=Duration(seconds=10**12),
        workflow_start_delay=Duration(seconds=DURATION_MAX),
        retry_policy=RetryPolicy(maximum_interval=Duration(seconds=DURATION_MAX)),
    )
    bounds.check_request(request)
    assert request.workflow_execution_timeout.seconds == CAP
    assert request.workflow_start_delay.seconds == CAP
    assert request.retry_policy.maximum_interval.seconds == CAP


def test_command_durations_are_capped_too():
    request = RespondWorkflowTaskCompletedRequest(
        commands=[
            Command(
                command_type=CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
                start_child_workflow_execution_command_attributes=StartChildWorkflowExecutionCommandAttributes(
                    workflow_execution_timeout=Duration(seconds=10**12)
                ),
            )
        ]
    )
    bounds.check_request(request)
    attrs = request.commands[0].start_child_workflow_execution_command_attributes
    assert attrs.workflow_execution_timeout.seconds == CAP


def deep_failure(depth: int) -> Failure:
    failure = Failure(message="leaf")
    for i in range(depth - 1):
        failure = Failure(message=f"level {i}", cause=failure)
    return failure


@pytest.mark.parametrize(
    ("request_", "fragment"),
    [
        (
            StartWorkflowExecutionRequest(retry_policy=RetryPolicy(backoff_coefficient=math.nan)),
            "Invalid retry_policy.backoff_coefficient: nan is not a finite number.",
        ),
        (
            StartWorkflowExecutionRequest(retry_policy=RetryPolicy(backoff_coefficient=math.inf)),
            "inf is not a finite number",
        ),
        (
            StartWorkflowExecutionRequest(priority=Priority(fairness_weight=-math.inf)),
            "Invalid priority.fairness_weight: -inf",
        ),
        (StartWorkflowExecutionRequest(identity="i" * 1001), "Identity length exceeds limit."),
        (SignalWorkflowExecutionRequest(identity="i" * (1 << 20)), "Identity length exceeds limit."),
        (
            StartWorkflowExecutionRequest(
                header=Header(fields={"h": Payload(data=b"x" * (bounds.BLOB_SIZE_LIMIT + 1))})
            ),
            "Header size exceeds limit. The header is 2097171 bytes; the limit is 2097152 bytes (2 MiB).",
        ),
        (
            RespondActivityTaskFailedRequest(failure=deep_failure(bounds.MAX_DEPTH)),
            "Request is nested more than 64 messages deep (at failure.cause",
        ),
        (
            CreateScheduleRequest(
                schedule={
                    "spec": ScheduleSpec(start_time=Timestamp(seconds=bounds.MAX_TIMESTAMP_SECONDS + 1))
                }
            ),
            "Invalid timestamp schedule.spec.start_time",
        ),
        (
            CreateScheduleRequest(schedule={"spec": ScheduleSpec(end_time=Timestamp(seconds=0, nanos=-1))}),
            "Invalid timestamp schedule.spec.end_time",
        ),
    ],
)
def test_requests_out_of_bounds_are_refused_naming_the_field(request_, fragment):
    with pytest.raises(InvalidArgument) as info:
        bounds.check_request(request_)
    assert fragment in info.value.message


def test_values_at_the_limits_pass():
    bounds.check_request(StartWorkflowExecutionRequest(identity="i" * 1000))
    bounds.check_request(RespondActivityTaskFailedRequest(failure=deep_failure(bounds.MAX_DEPTH - 1)))
    bounds.check_request(
        CreateScheduleRequest(
            schedule={"spec": ScheduleSpec(end_time=Timestamp(seconds=bounds.MAX_TIMESTAMP_SECONDS))}
        )
    )


def test_non_finite_numbers_in_commands_are_left_to_the_command_rules():
    """A NaN in a command fails the workflow task (with the command's cause), not the whole RPC."""
    request = RespondWorkflowTaskCompletedRequest(
        commands=[
            Command(
                command_type=CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
                schedule_activity_task_command_attributes=ScheduleActivityTaskCommandAttributes(
                    retry_policy=RetryPolicy(backoff_coefficient=math.nan)
                ),
            )
        ]
    )
    bounds.check_request(request)


def test_a_deeply_nested_request_that_passes_still_parses_inside_a_history():
    """What the bound lets through must parse again once history wraps it (protobuf stops at 100)."""
    from temporalio.api.history.v1 import History, HistoryEvent
    from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryResponse

    failure = deep_failure(bounds.MAX_DEPTH - 1)
    bounds.check_request(RespondActivityTaskFailedRequest(failure=failure))
    event = HistoryEvent(activity_task_failed_event_attributes={"failure": failure})
    response = GetWorkflowExecutionHistoryResponse(history=History(events=[event]))
    GetWorkflowExecutionHistoryResponse.FromString(response.SerializeToString())


# --- commands ------------------------------------------------------------------------------------


def timer(seconds: int, nanos: int = 0) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_START_TIMER,
        start_timer_command_attributes=StartTimerCommandAttributes(
            timer_id="t", start_to_fire_timeout=Duration(seconds=seconds, nanos=nanos)
        ),
    )


def child(**fields) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
        start_child_workflow_execution_command_attributes=StartChildWorkflowExecutionCommandAttributes(
            workflow_id="c", workflow_type={"name": "C"}, **fields
        ),
    )


def continue_as_new(**fields) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
        continue_as_new_workflow_execution_command_attributes=ContinueAsNewWorkflowExecutionCommandAttributes(
            **fields
        ),
    )


def activity(**fields) -> Command:
    return Command(
        command_type=CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
        schedule_activity_task_command_attributes=ScheduleActivityTaskCommandAttributes(
            activity_id="a", activity_type={"name": "x"}, **fields
        ),
    )


# The messages are the real server's, but for its "BadStartTimerAttributes: " prefix and, for children,
# the trailing Namespace= (Perdura runs children in the parent's namespace only).
BAD_COMMANDS = [
    (
        timer(-5),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES,
        "An invalid StartToFireTimeout is set on StartTimerCommand: negative duration. TimerId=t",
    ),
    (
        timer(1, -5),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES,
        "An invalid StartToFireTimeout is set on StartTimerCommand: "
        "duration has seconds and nanos with different signs. TimerId=t",
    ),
    (
        activity(start_to_close_timeout=Duration(seconds=-10)),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES,
        "invalid StartToCloseTimeout: negative duration",
    ),
    (
        child(workflow_execution_timeout=Duration(seconds=-1)),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_CHILD_EXECUTION_ATTRIBUTES,
        "Invalid WorkflowExecutionTimeout on StartChildWorkflowExecutionCommand: negative duration. "
        "WorkflowId=c WorkflowType=C",
    ),
    (
        child(retry_policy=RetryPolicy(backoff_coefficient=math.inf)),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_CHILD_EXECUTION_ATTRIBUTES,
        "RetryPolicy.backoff_coefficient must be a finite number",
    ),
    (
        continue_as_new(backoff_start_interval=Duration(seconds=-1)),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_CONTINUE_AS_NEW_ATTRIBUTES,
        "Invalid BackoffStartInterval on ContinueAsNewWorkflowExecutionCommand: negative duration.",
    ),
    (
        Command(
            command_type=CommandType.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
            upsert_workflow_search_attributes_command_attributes={"search_attributes": {}},
        ),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES,
        "IndexedFields is not set on UpsertWorkflowSearchAttributesCommand.",
    ),
    (
        Command(
            command_type=CommandType.COMMAND_TYPE_MODIFY_WORKFLOW_PROPERTIES,
            modify_workflow_properties_command_attributes={},
        ),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_MODIFY_WORKFLOW_PROPERTIES_ATTRIBUTES,
        "UpsertedMemo is not set on ModifyWorkflowPropertiesCommand.",
    ),
    (
        Command(
            command_type=CommandType.COMMAND_TYPE_RECORD_MARKER,
            record_marker_command_attributes=RecordMarkerCommandAttributes(marker_name="m" * 1001),
        ),
        Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_RECORD_MARKER_ATTRIBUTES,
        "MarkerName on RecordMarkerCommand exceeds length limit.",
    ),
]


@pytest.mark.parametrize(("command", "cause", "message"), BAD_COMMANDS)
def test_bad_command_attributes_fail_with_the_commands_cause(command, cause, message):
    with pytest.raises(CommandFailure) as info:
        command_bounds.check(command)
    assert info.value.cause == cause
    assert message in info.value.message


def test_command_context_is_never_taken_for_a_format_string():
    command = timer(-5)
    command.start_timer_command_attributes.timer_id = "{name}{0}"
    with pytest.raises(CommandFailure, match=r"TimerId=\{name\}\{0\}"):
        command_bounds.check(command)


@pytest.mark.parametrize(
    "command", [timer(5), timer(0), activity(start_to_close_timeout=Duration(seconds=10)), child()]
)
def test_good_commands_pass(command):
    command_bounds.check(command)


# --- retry policies --------------------------------------------------------------------------------


@pytest.mark.parametrize("coefficient", [math.nan, math.inf, -math.inf])
def test_a_non_finite_backoff_coefficient_is_refused(coefficient):
    with pytest.raises(retry.RetryPolicyError, match="finite"):
        retry.normalized(RetryPolicy(backoff_coefficient=coefficient))


def test_retry_intervals_are_capped_so_a_delay_always_has_a_date():
    """Duration's maximum as initial interval defaulted the maximum to 100 times it: no datetime holds that."""
    policy = retry.normalized(RetryPolicy(initial_interval=Duration(seconds=DURATION_MAX)))
    assert policy.initial_interval.seconds == CAP
    assert policy.maximum_interval.seconds == CAP
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for attempt in (1, 2, 50, 10_000):
        decision = retry.decide(policy=policy, attempt=attempt, failure=None, now=now, expiration=None)
        assert decision.delay == CAP
        now + timedelta(seconds=decision.delay)


# --- page tokens -----------------------------------------------------------------------------------


def history_token(cursor) -> bytes:
    return base64.b64encode(json.dumps(cursor).encode())


RUN = "c2623277-63cd-4a0e-9efe-96ff240a97b7"  # fixed: parametrize ids carry it, and xdist workers must collect the same ids


def test_history_token_round_trip():
    token = page_tokens.history_encode(run_id=RUN, next_event_id=7)
    assert page_tokens.history_decode(token) == (RUN, 7)


@pytest.mark.parametrize(
    "token",
    [
        b"garbage!!",
        history_token([RUN, 3]),
        history_token({"run": 5, "next": 3}),
        history_token({"run": "not-a-uuid", "next": 3}),
        history_token({"run": RUN, "next": "3"}),
        history_token({"run": RUN, "next": True}),
        history_token({"run": RUN, "next": 10**30}),
        history_token({"run": RUN, "next": 0}),
        history_token({"run": RUN, "next": 2.5}),
        history_token({"run": RUN}),
    ],
)
def test_history_tokens_of_the_right_shape_with_wrong_values_are_refused(token):
    with pytest.raises(InvalidArgument, match="Invalid NextPageToken."):
        page_tokens.history_decode(token)


@pytest.mark.parametrize("token", [b"x", b"-1", str(10**30).encode(), b"0", b"\xff", b"1e3"])
def test_reverse_history_tokens_are_strict(token):
    with pytest.raises(InvalidArgument, match="Invalid NextPageToken."):
        page_tokens.reverse_decode(token)


def test_schedule_list_token_round_trip():
    assert page_tokens.schedules_decode(page_tokens.schedules_encode("my/schedule é")) == "my/schedule é"


@pytest.mark.parametrize(
    "token",
    [b"abcd", b"garbage", b"\x00garbage\xff", base64.urlsafe_b64encode(b"a-schedule-id"), b"c2NoZWQ6\xff"],
)
def test_garbage_schedule_list_tokens_are_refused_not_ignored(token):
    with pytest.raises(InvalidArgument, match="Invalid NextPageToken."):
        page_tokens.schedules_decode(token)


# --- every request type, and the decoder the edge interceptor installs ---------------------------


def _request_types() -> list:
    from google.protobuf import symbol_database
    from temporalio.api.operatorservice.v1 import service_pb2 as operator_service
    from temporalio.api.workflowservice.v1 import service_pb2 as workflow_service

    db = symbol_database.Default()
    return [
        db.GetSymbol(method.input_type.full_name)
        for module in (workflow_service, operator_service)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    ]


def test_every_request_type_with_default_values_passes():
    types = _request_types()
    assert len(types) > 100
    for request_type in types:
        bounds.check_request(request_type())


def test_user_data_is_not_walked_but_everything_else_is():
    from temporalio.api.common.v1 import Memo, Payloads, SearchAttributes, WorkflowType

    for skipped in (Payload, Payloads, Memo, SearchAttributes):
        assert not bounds._bounded(skipped.DESCRIPTOR)
    for walked in (WorkflowType, Failure, RetryPolicy, Priority, Header, Command, ScheduleSpec):
        assert bounds._bounded(walked.DESCRIPTOR)


@pytest.mark.parametrize(
    ("request_", "path"),
    [
        (StartWorkflowExecutionRequest(workflow_id="a\x00b"), "workflow_id"),
        (StartWorkflowExecutionRequest(namespace="def\x00ault"), "namespace"),
        (StartWorkflowExecutionRequest(task_queue={"name": "q\x00"}), "task_queue.name"),
        (StartWorkflowExecutionRequest(identity="i\x00"), "identity"),
        (
            RespondWorkflowTaskCompletedRequest(
                commands=[
                    Command(start_timer_command_attributes=StartTimerCommandAttributes(timer_id="t\x00"))
                ]
            ),
            "commands[0].start_timer_command_attributes.timer_id",
        ),
        (RegisterNamespaceRequest(data={"owner": "a\x00"}), "data['owner']"),
        (RegisterNamespaceRequest(data={"own\x00er": "a"}), "data"),
    ],
)
def test_a_nul_in_an_id_or_name_is_refused_naming_the_field(request_, path):
    """Postgres text cannot hold NUL: such ids answered INTERNAL in production, and passed in `perdura dev`."""
    with pytest.raises(InvalidArgument) as info:
        bounds.check_request(request_)
    assert info.value.message == (
        f"Invalid {path}: a string may not contain the NUL character (\\x00); Postgres cannot store it."
    )


def test_a_nul_in_a_failure_message_is_kept():
    """Failures travel as bytes; an exception's text may hold anything."""
    bounds.check_request(
        RespondActivityTaskFailedRequest(
            failure=Failure(message="bad \x00 byte", stack_trace="\x00", cause=Failure(message="\x00"))
        )
    )


def test_the_decoder_refuses_what_grpcio_would_answer_unknown():
    from engine.api import edge

    decode = edge.decoder(StartWorkflowExecutionRequest.FromString)
    bad_utf8 = (
        StartWorkflowExecutionRequest(workflow_id="QQQQ").SerializeToString().replace(b"QQQQ", b"\xff\xfeQQ")
    )
    refused = decode(bad_utf8)
    assert isinstance(refused, edge.Refused)
    assert "could not be decoded as a StartWorkflowExecutionRequest" in refused.message
    assert "must be valid UTF-8" in refused.message
    capped = decode(
        StartWorkflowExecutionRequest(workflow_run_timeout=Duration(seconds=10**12)).SerializeToString()
    )
    assert capped.workflow_run_timeout.seconds == CAP
    refused = decode(StartWorkflowExecutionRequest(identity="i" * 1001).SerializeToString())
    assert refused == edge.Refused("Identity length exceeds limit.")


def test_a_namespace_name_over_the_id_limit_is_refused_before_anything_echoes_it():
    """Temporal's frontend answers "Namespace length exceeds limit."; every not-found message quotes the name."""
    request = StartWorkflowExecutionRequest(namespace="x" * (bounds.MAX_ID_LENGTH + 1), workflow_id="w")
    with pytest.raises(InvalidArgument, match=r"^Namespace length exceeds limit\.$"):
        bounds.check_request(request)
    bounds.check_request(StartWorkflowExecutionRequest(namespace="x" * bounds.MAX_ID_LENGTH, workflow_id="w"))


def _trailer_bytes(message: str) -> int:
    """What a status with `message` puts in the trailers: grpc-message percent-encoded, and the status
    again in grpc-status-details-bin, base64."""
    from google.rpc import status_pb2

    encoded = sum(1 if 0x20 <= b <= 0x7E and b != 0x25 else 3 for b in message.encode())
    details = status_pb2.Status(code=3, message=message).SerializeToString()
    return encoded + len(base64.b64encode(details))


@pytest.mark.parametrize("char", ["x", "%", "é", "😀", "\n"])
def test_status_messages_are_cut_to_fit_the_trailers(char):
    """A message quoting client input is cut on a character boundary so that both of its copies fit the
    clients' 8 KiB trailer limit (5,002 "é" in a version string did not: the fuzz suite found it)."""
    from engine.api.errors import MAX_MESSAGE_BYTES, bounded

    short = "Namespace " + char * 100 + " is not found."
    assert bounded(short) == short
    cut = bounded("Namespace " + char * 100_000 + " is not found.")
    assert cut.endswith("… (truncated)")
    assert cut.startswith("Namespace " + char * 10)
    assert _trailer_bytes(cut) <= 5 * 1024
    assert _trailer_bytes(bounded(char * 600)) <= 5 * 1024
    ascii_only = "x" * MAX_MESSAGE_BYTES
    assert bounded(ascii_only) == ascii_only  # plain ASCII keeps its whole 2 KiB


@pytest.mark.parametrize("sign", [1, -1])
def test_folding_nanos_into_seconds_at_int64s_end_caps_instead_of_overflowing(sign):
    """seconds = ±(2**63 - 1) with nanos out of range: the fold used to write 2**63 into the int64 field
    (ValueError, UNKNOWN to the client); a long fuzz campaign found it."""
    value = Duration(seconds=sign * (2**63 - 1), nanos=sign * 1_500_000_000)
    bounds.cap_duration(value)
    assert (value.seconds, value.nanos) == (sign * bounds.MAX_DURATION_SECONDS, 0)


def test_a_continue_as_new_with_an_invalid_cron_schedule_fails_the_task():
    """Its next run would raise computing its successor's start when it closed (a long fuzz campaign found
    the traceback); the command fails the task with its cause instead, as the schedule on a start is refused."""
    command = Command(
        command_type=CommandType.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
        continue_as_new_workflow_execution_command_attributes=ContinueAsNewWorkflowExecutionCommandAttributes(
            cron_schedule="' OR 1=1 --"
        ),
    )
    with pytest.raises(CommandFailure, match="Invalid CronSchedule") as info:
        command_bounds.check(command)
    assert (
        info.value.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_CONTINUE_AS_NEW_ATTRIBUTES
    )
