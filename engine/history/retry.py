"""Retry decisions for activities, as Temporal makes them (common/retrypolicy, history/workflow/retry.go)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.api.common.v1 import RetryPolicy
from temporalio.api.enums.v1 import RetryState, TimeoutType
from temporalio.api.failure.v1 import Failure

from engine.bounds import MAX_DURATION_SECONDS
from engine.history.retry_jitter import jittered

DEFAULT_INITIAL_INTERVAL = 1.0
DEFAULT_BACKOFF_COEFFICIENT = 2.0
DEFAULT_MAXIMUM_INTERVAL_COEFFICIENT = 100.0
TIMEOUT_TYPE_PREFIX = "TemporalTimeout:"
_TIMEOUT_NAMES = {
    TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE: "StartToClose",
    TimeoutType.TIMEOUT_TYPE_HEARTBEAT: "Heartbeat",
}


class RetryPolicyError(ValueError):
    """A retry policy that cannot be honoured; the message names the field."""


def normalized(policy: RetryPolicy | None) -> RetryPolicy:
    """The policy with Temporal's defaults filled in (initial 1s, coefficient 2, maximum 100x initial).

    Raises:
        RetryPolicyError: a negative or inconsistent field.
    """
    result = RetryPolicy()
    if policy is not None:
        result.CopyFrom(policy)
    initial = result.initial_interval.ToTimedelta().total_seconds()
    maximum = result.maximum_interval.ToTimedelta().total_seconds()
    if result.maximum_attempts == 1:
        return result  # one attempt never retries, so nothing else in the policy matters (Temporal's rule)
    if initial < 0:
        raise RetryPolicyError("RetryPolicy.initial_interval cannot be negative")
    if maximum < 0:
        raise RetryPolicyError("RetryPolicy.maximum_interval cannot be negative")
    if result.maximum_attempts < 0:
        raise RetryPolicyError("RetryPolicy.maximum_attempts cannot be negative")
    if not math.isfinite(result.backoff_coefficient):
        # Temporal stores a NaN; here every delay computed from it would be NaN, which no timer can wait.
        raise RetryPolicyError("RetryPolicy.backoff_coefficient must be a finite number")
    if result.backoff_coefficient != 0 and result.backoff_coefficient < 1:
        raise RetryPolicyError("RetryPolicy.backoff_coefficient cannot be less than 1")
    if initial == 0:
        initial = DEFAULT_INITIAL_INTERVAL
        result.initial_interval.FromTimedelta(timedelta(seconds=initial))
    if result.backoff_coefficient == 0:
        result.backoff_coefficient = DEFAULT_BACKOFF_COEFFICIENT
    if maximum == 0:
        result.maximum_interval.FromTimedelta(
            timedelta(seconds=initial * DEFAULT_MAXIMUM_INTERVAL_COEFFICIENT)
        )
    elif maximum < initial:
        raise RetryPolicyError("RetryPolicy.maximum_interval cannot be less than its initial_interval")
    # Intervals are capped at 100 years, as Temporal caps durations: an initial interval that long would
    # otherwise default the maximum to 100 times it, past the end of the calendar.
    for interval in (result.initial_interval, result.maximum_interval):
        if interval.ToTimedelta().total_seconds() > MAX_DURATION_SECONDS:
            interval.FromTimedelta(timedelta(seconds=MAX_DURATION_SECONDS))
    return result


def is_retryable(failure: Failure | None, non_retryable_types: list[str]) -> bool:
    if failure is None:
        return True
    info = failure.WhichOneof("failure_info")
    if info in ("terminated_failure_info", "canceled_failure_info"):
        return False
    if info == "timeout_failure_info":
        name = _TIMEOUT_NAMES.get(failure.timeout_failure_info.timeout_type)
        return name is not None and TIMEOUT_TYPE_PREFIX + name not in non_retryable_types
    if info == "server_failure_info":
        return not failure.server_failure_info.non_retryable
    if info == "application_failure_info":
        app = failure.application_failure_info
        return not app.non_retryable and app.type not in non_retryable_types
    return True


@dataclass(frozen=True, slots=True)
class RetryDecision:
    retry_state: RetryState.ValueType
    delay: float = 0.0

    @property
    def retry(self) -> bool:
        return self.retry_state == RetryState.RETRY_STATE_IN_PROGRESS


def decide(
    *,
    policy: RetryPolicy,
    attempt: int,
    failure: Failure | None,
    now: datetime,
    expiration: datetime | None,
    jitter: float = 0.0,
    jitter_key: str = "",
) -> RetryDecision:
    """Whether attempt `attempt` (just failed) gets another, and after what delay.

    `jitter` (0 to 1) shortens the policy's delay by a share keyed on `jitter_key` (retry_jitter.py); the
    decision itself is taken on the unjittered delay, and an application's next_retry_delay is kept as is.
    """
    if not is_retryable(failure, list(policy.non_retryable_error_types)):
        return RetryDecision(RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE)
    if policy.maximum_attempts > 0 and attempt >= policy.maximum_attempts:
        return RetryDecision(RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED)
    maximum = policy.maximum_interval.ToTimedelta().total_seconds()
    if (
        failure is not None
        and failure.WhichOneof("failure_info") == "application_failure_info"
        and failure.application_failure_info.HasField("next_retry_delay")
    ):
        interval = failure.application_failure_info.next_retry_delay.ToTimedelta().total_seconds()
        maximum = interval  # the application's delay overrides the policy's maximum interval too
        jitter = 0.0  # and is the application's exact choice
    else:
        initial = policy.initial_interval.ToTimedelta().total_seconds()
        try:
            interval = initial * policy.backoff_coefficient ** (attempt - 1)
        except OverflowError:
            interval = float("inf")
    if maximum == 0 and interval <= 0:
        return RetryDecision(RetryState.RETRY_STATE_TIMEOUT)
    if maximum != 0 and (interval <= 0 or interval > maximum):
        interval = maximum
    if expiration is not None and now + timedelta(seconds=interval) > expiration:
        return RetryDecision(RetryState.RETRY_STATE_TIMEOUT)
    return RetryDecision(RetryState.RETRY_STATE_IN_PROGRESS, jittered(interval, jitter, jitter_key))
