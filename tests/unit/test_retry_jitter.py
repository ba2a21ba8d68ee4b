"""Retry jitter (engine.history.retry_jitter): bounded, deterministic per attempt, never past the policy's
interval or the timeouts, and read from the `perdura-retry-jitter` header."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.command.v1 import Command, StartChildWorkflowExecutionCommandAttributes
from temporalio.api.common.v1 import Header, Payload, RetryPolicy, WorkflowType
from temporalio.api.enums.v1 import CommandType, WorkflowTaskFailedCause
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.converter import default as default_converter

from engine.history import retry
from engine.history.retry_jitter import HEADER, header_fraction, header_problem, jittered
from tests.unit import history_harness as h
from tests.unit.history_harness import app_failure, at, dur

POLICY = retry.normalized(
    RetryPolicy(initial_interval=dur(10), backoff_coefficient=2, maximum_interval=dur(60))
)


@given(
    delay=st.floats(min_value=0, max_value=1e9),
    fraction=st.floats(min_value=0, max_value=1),
    key=st.text(max_size=40),
)
def test_jitter_is_bounded_and_deterministic(delay, fraction, key):
    out = jittered(delay, fraction, key)
    assert out == jittered(delay, fraction, key)
    assert delay * (1 - fraction) - 0.001 <= out <= delay


def test_off_is_exact_and_full_jitter_spreads_over_the_whole_interval():
    assert [jittered(10.0, 0.0, str(i)) for i in range(5)] == [10.0] * 5
    spread = [jittered(10.0, 1.0, f"run|attempt {i}") for i in range(2000)]
    assert min(spread) < 0.1  # anywhere from no wait to the whole interval
    assert max(spread) > 9.9
    assert 4.7 < sum(spread) / len(spread) < 5.3
    quarter = [jittered(10.0, 0.25, f"k{i}") for i in range(2000)]
    assert 7.5 <= min(quarter) < 7.6
    assert max(quarter) > 9.9


def test_decide_jitters_the_delay_but_not_the_decision():
    plain = retry.decide(policy=POLICY, attempt=3, failure=app_failure(), now=at(0), expiration=None)
    assert plain.delay == 40
    keys = [f"activity|run|5|{n}" for n in range(50)]
    delays = [
        retry.decide(
            policy=POLICY,
            attempt=3,
            failure=app_failure(),
            now=at(0),
            expiration=None,
            jitter=0.5,
            jitter_key=k,
        ).delay
        for k in keys
    ]
    assert all(20 <= d <= 40 for d in delays)
    assert len(set(delays)) > 40
    # A retry whose unjittered delay passes the expiration is not made possible by jitter: still a timeout.
    late = retry.decide(
        policy=POLICY,
        attempt=3,
        failure=app_failure(),
        now=at(0),
        expiration=at(39),
        jitter=1.0,
        jitter_key="k",
    )
    assert late.retry_state == retry.RetryState.RETRY_STATE_TIMEOUT
    # At the maximum interval a jittered delay stays under it.
    capped = retry.decide(
        policy=POLICY,
        attempt=9,
        failure=app_failure(),
        now=at(0),
        expiration=None,
        jitter=1.0,
        jitter_key="k",
    )
    assert 0 <= capped.delay <= 60
    # An application's own next_retry_delay is its exact choice.
    chosen = retry.decide(
        policy=POLICY,
        attempt=3,
        failure=app_failure(next_retry_delay=7),
        now=at(0),
        expiration=None,
        jitter=1.0,
        jitter_key="k",
    )
    assert chosen.delay == 7


def _header(payload: Payload) -> Header:
    return Header(fields={HEADER: payload})


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.3, 0.3), (1, 1.0), (0, 0.0), (1.5, None), (-0.1, None), ("0.5", None), (True, None), (None, None)],
)
def test_header_values(value, expected):
    payload = default_converter().payload_converter.to_payloads([value])[0]
    assert header_fraction(_header(payload)) == expected
    # A request or command carrying a value that is not a fraction is refused, saying what it must be.
    problem = header_problem(_header(payload))
    assert (problem is None) == (expected is not None)
    if problem is not None:
        assert "perdura-retry-jitter header must be" in problem


def test_headers_without_a_number():
    assert header_fraction(None) is None
    assert header_fraction(Header()) is None
    assert header_problem(None) is None
    assert header_problem(Header(fields={"other": Payload()})) is None
    assert header_fraction(_header(Payload(metadata={"encoding": b"binary/plain"}, data=b"0.5"))) is None
    assert header_fraction(_header(Payload(metadata={"encoding": b"json/plain"}, data=b"{nope"))) is None


def test_a_child_command_with_a_bad_header_fails_the_workflow_task():
    run = h.Run()
    run.start_wft(1)
    child = Command(
        command_type=CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
        start_child_workflow_execution_command_attributes=StartChildWorkflowExecutionCommandAttributes(
            namespace=run.state.namespace,
            workflow_id="child-1",
            workflow_type=WorkflowType(name="Child"),
            task_queue=TaskQueue(name=h.TASK_QUEUE),
            header=_header(Payload(metadata={"encoding": b"json/plain"}, data=b"-1")),
        ),
    )
    failure = run.complete_wft(2, child)
    assert failure is not None
    assert (
        failure.cause
        == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_CHILD_EXECUTION_ATTRIBUTES
    )
    assert run.state.children == {}
