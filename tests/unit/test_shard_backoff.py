"""The retry rule of shard queue rows (engine/shards/backoff.py) and the rate-limited failure log."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from engine.shards import backoff
from engine.shards.failure_log import FailureLog

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
POLICY = backoff.RetryPolicy(max_attempts=10, initial=timedelta(seconds=1), maximum=timedelta(minutes=5))


@pytest.mark.parametrize(
    ("failures_before", "wait"),
    [(0, 1), (1, 2), (2, 4), (3, 8), (7, 128), (8, 256)],
)
def test_waits_double_from_the_initial_interval(failures_before, wait):
    after = backoff.after_failure(failures_before=failures_before, now=NOW, policy=POLICY)
    assert after.failures == failures_before + 1
    assert after.retry_at == NOW + timedelta(seconds=wait)
    assert not after.parked


def test_waits_are_capped():
    policy = backoff.RetryPolicy(
        max_attempts=2**62, initial=timedelta(seconds=1), maximum=timedelta(minutes=5)
    )
    for before in (9, 10, 63, 64, 500, 10**9):
        after = backoff.after_failure(failures_before=before, now=NOW, policy=policy)
        assert after.retry_at == NOW + timedelta(minutes=5)


def test_the_last_attempt_parks_the_row():
    after = backoff.after_failure(failures_before=8, now=NOW, policy=POLICY)
    assert (after.failures, after.parked) == (9, False)
    after = backoff.after_failure(failures_before=9, now=NOW, policy=POLICY)
    assert (after.failures, after.retry_at, after.parked) == (10, None, True)


def test_a_policy_of_one_attempt_parks_at_the_first_failure():
    after = backoff.after_failure(failures_before=0, now=NOW, policy=backoff.RetryPolicy(max_attempts=1))
    assert after.parked
    assert after.failures == 1


def test_total_wait_before_parking_with_the_defaults():
    """With the defaults a row is parked after 10 attempts spread over about 8.5 minutes."""
    total, failures, now = timedelta(0), 0, NOW
    while True:
        after = backoff.after_failure(failures_before=failures, now=now, policy=backoff.RetryPolicy())
        failures = after.failures
        if after.parked:
            break
        total += after.retry_at - now
        now = after.retry_at
    assert failures == 10
    assert total == timedelta(seconds=1 + 2 + 4 + 8 + 16 + 32 + 64 + 128 + 256)


def test_errors_are_kept_short():
    text = backoff.describe_error(OverflowError("date value out of range " + "x" * 10_000))
    assert text.startswith("OverflowError: date value out of range")
    assert len(text) == backoff.ERROR_CHARS
    assert backoff.describe_error(KeyError()) == "KeyError"


def _raised(message: str) -> Exception:
    try:
        raise ValueError(message)
    except ValueError as e:
        return e


def test_repeated_failures_log_one_traceback_then_a_count_per_interval(caplog):
    clock = [1000.0]
    log = FailureLog(logging.getLogger("test.failures"), interval=60.0)
    import engine.shards.failure_log as module

    real = module.time.monotonic
    module.time.monotonic = lambda: clock[0]
    try:
        with caplog.at_level(logging.INFO, logger="test.failures"):
            for _ in range(1000):
                log.failed("transfer:1", "transfer row 1 failed", _raised("boom"))
                clock[0] += 0.01  # 1000 failures in 10 s
            log.failed("transfer:2", "transfer row 2 failed", _raised("bang"))
            clock[0] += 60
            log.failed("transfer:1", "transfer row 1 failed", _raised("boom"))
    finally:
        module.time.monotonic = real
    records = [(r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert records == [
        ("transfer row 1 failed", True),
        ("transfer row 2 failed", True),
        (
            "transfer row 1 failed (1000 failures since the last report, tracebacks suppressed): "
            "ValueError: boom",
            False,
        ),
    ]


def test_a_forgotten_key_logs_its_traceback_again(caplog):
    log = FailureLog(logging.getLogger("test.failures2"), interval=60.0)
    with caplog.at_level(logging.INFO, logger="test.failures2"):
        log.failed("k", "k failed", _raised("one"))
        log.failed("k", "k failed", _raised("two"))
        log.forget("k")
        log.failed("k", "k failed", _raised("three"))
    assert [r.exc_info is not None for r in caplog.records] == [True, True]
