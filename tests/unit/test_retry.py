"""Activity retry decisions (engine.history.retry), as Temporal makes them."""

from __future__ import annotations

import pytest
from temporalio.api.common.v1 import RetryPolicy
from temporalio.api.enums.v1 import RetryState, TimeoutType
from temporalio.api.failure.v1 import (
    CanceledFailureInfo,
    Failure,
    ServerFailureInfo,
    TerminatedFailureInfo,
    TimeoutFailureInfo,
)

from engine.history import retry
from tests.unit.history_harness import app_failure, at, dur

IN_PROGRESS = RetryState.RETRY_STATE_IN_PROGRESS


def policy(initial=0.0, coefficient=0.0, maximum=0.0, attempts=0, non_retryable=()) -> RetryPolicy:
    result = RetryPolicy(
        backoff_coefficient=coefficient,
        maximum_attempts=attempts,
        non_retryable_error_types=list(non_retryable),
    )
    if initial:
        result.initial_interval.CopyFrom(dur(initial))
    if maximum:
        result.maximum_interval.CopyFrom(dur(maximum))
    return result


def as_tuple(p: RetryPolicy) -> tuple:
    return (
        p.initial_interval.ToTimedelta().total_seconds(),
        p.backoff_coefficient,
        p.maximum_interval.ToTimedelta().total_seconds(),
        p.maximum_attempts,
        list(p.non_retryable_error_types),
    )


NORMALIZED = [
    (None, (1, 2, 100, 0, [])),
    (policy(), (1, 2, 100, 0, [])),
    (policy(initial=0.5), (0.5, 2, 50, 0, [])),
    (policy(initial=2, coefficient=1), (2, 1, 200, 0, [])),
    (policy(initial=2, coefficient=3, maximum=2, attempts=4), (2, 3, 2, 4, [])),
    (policy(maximum=30), (1, 2, 30, 0, [])),
    (policy(non_retryable=["A", "B"]), (1, 2, 100, 0, ["A", "B"])),
]


@pytest.mark.parametrize(("given", "expected"), NORMALIZED, ids=[str(i) for i in range(len(NORMALIZED))])
def test_normalized_fills_in_temporal_defaults(given, expected):
    result = retry.normalized(given)
    assert as_tuple(result) == expected
    if given is not None:
        assert result is not given  # the command's policy is left alone


def _negative_initial() -> RetryPolicy:
    p = RetryPolicy()
    p.initial_interval.seconds = -1
    return p


def _negative_maximum() -> RetryPolicy:
    p = RetryPolicy()
    p.maximum_interval.seconds = -1
    return p


INVALID = [
    ("negative initial", _negative_initial()),
    ("negative maximum", _negative_maximum()),
    ("negative attempts", policy(attempts=-1)),
    ("coefficient below 1", policy(coefficient=0.5)),
    ("maximum below initial", policy(initial=5, maximum=2)),
    ("maximum below the default initial", policy(maximum=0.5)),
]


@pytest.mark.parametrize("given", [i[1] for i in INVALID], ids=[i[0] for i in INVALID])
def test_normalized_rejects_inconsistent_policies(given):
    with pytest.raises(retry.RetryPolicyError):
        retry.normalized(given)


def test_policy_with_a_single_attempt_is_not_validated_further():
    result = retry.normalized(policy(coefficient=0.5, attempts=1))
    assert result.maximum_attempts == 1


def timeout(timeout_type: int) -> Failure:
    return Failure(message="t", timeout_failure_info=TimeoutFailureInfo(timeout_type=timeout_type))


RETRYABLE = [
    ("no failure", None, [], True),
    ("application", app_failure(), [], True),
    ("application non-retryable flag", app_failure(non_retryable=True), [], False),
    ("application type listed", app_failure(type="Bad"), ["Bad"], False),
    ("application other type listed", app_failure(type="Fine"), ["Bad"], True),
    ("start-to-close timeout", timeout(TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE), [], True),
    ("heartbeat timeout", timeout(TimeoutType.TIMEOUT_TYPE_HEARTBEAT), [], True),
    (
        "start-to-close timeout listed",
        timeout(TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE),
        ["TemporalTimeout:StartToClose"],
        False,
    ),
    (
        "heartbeat timeout listed",
        timeout(TimeoutType.TIMEOUT_TYPE_HEARTBEAT),
        ["TemporalTimeout:Heartbeat"],
        False,
    ),
    ("schedule-to-start timeout", timeout(TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START), [], False),
    ("schedule-to-close timeout", timeout(TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE), [], False),
    ("server retryable", Failure(server_failure_info=ServerFailureInfo(non_retryable=False)), [], True),
    ("server non-retryable", Failure(server_failure_info=ServerFailureInfo(non_retryable=True)), [], False),
    ("canceled", Failure(canceled_failure_info=CanceledFailureInfo()), [], False),
    ("terminated", Failure(terminated_failure_info=TerminatedFailureInfo()), [], False),
    ("no failure info", Failure(message="plain"), [], True),
]


@pytest.mark.parametrize(
    ("failure", "listed", "expected"), [r[1:] for r in RETRYABLE], ids=[r[0] for r in RETRYABLE]
)
def test_is_retryable(failure, listed, expected):
    assert retry.is_retryable(failure, listed) is expected


DEFAULT = retry.normalized(None)

DECISIONS = [
    # (policy, attempt that just failed, failure, seconds until expiration or None) -> (retry state, delay)
    ("attempt 1: initial", DEFAULT, 1, app_failure(), None, (IN_PROGRESS, 1)),
    ("attempt 2: doubled", DEFAULT, 2, app_failure(), None, (IN_PROGRESS, 2)),
    ("attempt 5", DEFAULT, 5, app_failure(), None, (IN_PROGRESS, 16)),
    ("attempt 8: capped at 100x initial", DEFAULT, 8, app_failure(), None, (IN_PROGRESS, 100)),
    ("huge attempt: capped", DEFAULT, 5000, app_failure(), None, (IN_PROGRESS, 100)),
    (
        "coefficient 1",
        retry.normalized(policy(initial=3, coefficient=1)),
        9,
        app_failure(),
        None,
        (IN_PROGRESS, 3),
    ),
    (
        "maximum attempts reached",
        retry.normalized(policy(attempts=3)),
        3,
        app_failure(),
        None,
        (RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED, 0),
    ),
    (
        "below maximum attempts",
        retry.normalized(policy(attempts=3)),
        2,
        app_failure(),
        None,
        (IN_PROGRESS, 2),
    ),
    (
        "non-retryable first",
        retry.normalized(policy(attempts=1)),
        1,
        app_failure(non_retryable=True),
        None,
        (RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE, 0),
    ),
    ("next retry delay", DEFAULT, 1, app_failure(next_retry_delay=7), None, (IN_PROGRESS, 7)),
    ("fits before expiration", DEFAULT, 3, app_failure(), 4, (IN_PROGRESS, 4)),
    ("does not fit before expiration", DEFAULT, 3, app_failure(), 3.9, (RetryState.RETRY_STATE_TIMEOUT, 0)),
    (
        "delay does not fit",
        DEFAULT,
        1,
        app_failure(next_retry_delay=10),
        5,
        (RetryState.RETRY_STATE_TIMEOUT, 0),
    ),
    ("timeout retried", DEFAULT, 1, timeout(TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE), None, (IN_PROGRESS, 1)),
]


@pytest.mark.parametrize(
    ("given", "attempt", "failure", "expires_in", "expected"),
    [d[1:] for d in DECISIONS],
    ids=[d[0] for d in DECISIONS],
)
def test_decide(given, attempt, failure, expires_in, expected):
    now = at(100)
    expiration = at(100 + expires_in) if expires_in is not None else None

    decision = retry.decide(policy=given, attempt=attempt, failure=failure, now=now, expiration=expiration)

    assert (decision.retry_state, decision.delay) == expected
    assert decision.retry is (expected[0] == IN_PROGRESS)
