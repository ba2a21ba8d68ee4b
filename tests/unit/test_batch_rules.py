"""The batch operations' pure rules: what a start may ask, the pace, the order of Temporal's checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.batch.v1 import (
    BatchOperationReset,
    BatchOperationResetActivities,
    BatchOperationSignal,
    BatchOperationTermination,
    BatchOperationUnpauseActivities,
    BatchOperationUpdateActivityOptions,
)
from temporalio.api.common.v1 import Execution, WorkflowExecution
from temporalio.api.enums.v1 import ExecutionType
from temporalio.api.workflowservice.v1 import StartBatchOperationRequest

from engine.batches import rules
from engine.errors import InvalidArgument, Unimplemented

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
REQUIRED = (
    "must provide required parameters: BatchType,Reason,Namespace, AND one of "
    "(Query OR Executions OR TargetExecutions)"
)


def _request(**fields) -> StartBatchOperationRequest:
    base = {
        "namespace": "default",
        "job_id": "j",
        "reason": "r",
        "visibility_query": "WorkflowType = 'x'",
        "termination_operation": BatchOperationTermination(),
    }
    base.update(fields)
    return StartBatchOperationRequest(**{k: v for k, v in base.items() if v is not None})


def test_a_query_batch_names_its_operation_and_identity():
    plan = rules.check_start(
        _request(termination_operation=None, signal_operation=BatchOperationSignal(signal="s", identity="me"))
    )
    assert (plan.operation_type, plan.operation_field, plan.query, plan.identity) == (
        rules.SIGNAL,
        "signal_operation",
        "WorkflowType = 'x'",
        "me",
    )
    assert plan.targets == ()


def test_listed_runs_are_kept_in_order_once_each_from_both_fields():
    plan = rules.check_start(
        _request(
            visibility_query=None,
            executions=[WorkflowExecution(workflow_id="a"), WorkflowExecution(workflow_id="b", run_id="r1")],
        )
    )
    assert plan.targets == (rules.Target("a", ""), rules.Target("b", "r1"))
    plan = rules.check_start(
        _request(
            visibility_query=None,
            target_executions=[
                Execution(type=ExecutionType.EXECUTION_TYPE_WORKFLOW, business_id="a"),
                Execution(business_id="a"),
                Execution(business_id="c"),
            ],
        )
    )
    assert plan.targets == (rules.Target("a", ""), rules.Target("c", ""))


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"job_id": None, "reason": None}, InvalidArgument, "JobId is not set on request."),
        ({"job_id": "x" * 1001}, InvalidArgument, "JobId length exceeds limit."),
        ({"reason": None}, InvalidArgument, REQUIRED),
        ({"visibility_query": None}, InvalidArgument, REQUIRED),
        ({"termination_operation": None}, InvalidArgument, REQUIRED),
        (
            {"executions": [WorkflowExecution(workflow_id="a")]},
            InvalidArgument,
            "visibility query, executions, and target executions are mutually exclusive",
        ),
        (
            {"visibility_query": None, "executions": [WorkflowExecution(run_id="r")]},
            InvalidArgument,
            "WorkflowId is not set on request.",
        ),
        (
            {"termination_operation": None, "signal_operation": BatchOperationSignal()},
            InvalidArgument,
            "SignalName is not set on request.",
        ),
        ({"max_operations_per_second": float("nan")}, InvalidArgument, None),
        ({"max_operations_per_second": -1.0}, InvalidArgument, None),
        (
            {
                "termination_operation": None,
                "unpause_activities_operation": BatchOperationUnpauseActivities(),
            },
            InvalidArgument,
            "Either activity type or match_all must be set on the batch operation.",
        ),
        (
            {
                "termination_operation": None,
                "update_activity_options_operation": BatchOperationUpdateActivityOptions(match_all=True),
            },
            Unimplemented,
            "Perdura does not run the batch operation update_activity_options_operation yet.",
        ),
        (
            {
                "visibility_query": None,
                "target_executions": [Execution(type=ExecutionType.EXECUTION_TYPE_ACTIVITY, business_id="a")],
            },
            Unimplemented,
            None,
        ),
    ],
)
def test_refused_starts(fields, error, message):
    with pytest.raises(error) as caught:
        rules.check_start(_request(**fields))
    if message is not None:
        assert caught.value.message == message


@pytest.mark.parametrize(
    ("field", "operation", "kind"),
    [
        (
            "unpause_activities_operation",
            BatchOperationUnpauseActivities(match_all=True),
            rules.UNPAUSE_ACTIVITIES,
        ),
        ("reset_activities_operation", BatchOperationResetActivities(type="charge"), rules.RESET_ACTIVITIES),
    ],
)
def test_activity_unpause_and_reset_are_supported_operations(field, operation, kind):
    plan = rules.check_start(_request(termination_operation=None, **{field: operation}))
    assert plan.operation_type == kind
    assert plan.operation_field == field


def test_reset_is_a_supported_operation():
    plan = rules.check_start(_request(termination_operation=None, reset_operation=BatchOperationReset()))
    assert plan.operation_type == rules.RESET


@pytest.mark.parametrize(
    ("requested", "cap", "rate"),
    [(0.0, 50.0, 50.0), (10.0, 50.0, 10.0), (500.0, 50.0, 50.0), (0.5, 50.0, 0.5)],
)
def test_the_rate_is_the_request_s_within_the_cap(requested, cap, rate):
    assert rules.effective_rps(requested, cap) == rate


def test_pace_spaces_actions_by_the_rate():
    paced = T0
    times = []
    now = T0
    for _ in range(5):
        assert rules.may_act(paced, now)
        times.append(now)
        paced = rules.after_action(paced, now, 10.0)
        now = paced
    assert [(t - T0).total_seconds() for t in times] == pytest.approx([0, 0.1, 0.2, 0.3, 0.4])
    assert not rules.may_act(paced, paced - timedelta(milliseconds=1))


def test_a_batch_that_waited_catches_up_one_second_at_most():
    now = T0 + timedelta(seconds=60)  # the batch was last allowed at T0 (a worker was down for a minute)
    paced = T0
    taken = 0
    while rules.may_act(paced, now):
        paced = rules.after_action(paced, now, 10.0)
        taken += 1
    assert taken == 11  # the one due now and one second's worth at 10/s, then the rate again
    assert rules.wake_at(paced) == paced + rules.WAKE_SLACK


def test_a_listed_run_hosting_a_standalone_activity_is_refused():
    """Batch operations act on workflows: a run id's reserved prefix (visibility.divisions) is refused."""
    with pytest.raises(InvalidArgument, match="may not begin with the control character U\\+001F"):
        rules.check_start(
            _request(
                visibility_query=None,
                executions=[WorkflowExecution(workflow_id="\x1fstandalone-activity\x1fa")],
            )
        )
