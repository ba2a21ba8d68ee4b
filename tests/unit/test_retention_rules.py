"""The pure retention rules: a closed run's due time and the order of its deletion steps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.history import retention
from engine.history.retention import Step
from tenants.api_keys import format_duration, parse_duration

CLOSED = datetime(2026, 12, 2, 17, 0, 0, 250000, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kept", "due"),
    [
        (timedelta(seconds=30), datetime(2026, 12, 2, 17, 0, 30, 250000, tzinfo=UTC)),
        (timedelta(days=1), datetime(2026, 12, 3, 17, 0, 0, 250000, tzinfo=UTC)),
        (timedelta(days=90), datetime(2027, 3, 2, 17, 0, 0, 250000, tzinfo=UTC)),
    ],
)
def test_a_run_is_due_its_retention_after_it_closed(kept, due):
    assert retention.due_at(CLOSED, kept) == due


def test_due_time_refuses_a_naive_close_time_and_a_retention_that_is_not_positive():
    with pytest.raises(ValueError, match="aware"):
        retention.due_at(CLOSED.replace(tzinfo=None), timedelta(days=1))
    with pytest.raises(ValueError, match="positive"):
        retention.due_at(CLOSED, timedelta(0))


def test_a_retention_that_is_missing_or_not_positive_falls_back_to_a_day():
    assert retention.effective(timedelta(seconds=30)) == timedelta(seconds=30)
    assert retention.effective(timedelta(0)) == retention.FALLBACK_RETENTION == timedelta(days=1)
    assert retention.effective(None) == timedelta(days=1)


def test_the_steps_archive_first_then_delete_visibility_first_and_the_run_last():
    order = []
    step: Step | None = Step(0)  # a new row's step
    while step is not None:
        order.append(step)
        step = retention.after(step, deleted=0)
    assert order == [
        Step.ARCHIVE,
        Step.VISIBILITY,
        Step.HISTORY,
        Step.TASKS,
        Step.QUERIES,
        Step.TIMERS,
        Step.TRANSFERS,
        Step.RUN,
    ]


@pytest.mark.parametrize("step", [Step.HISTORY, Step.TASKS, Step.QUERIES, Step.TIMERS, Step.TRANSFERS])
def test_a_full_batch_runs_its_step_again_and_a_short_one_moves_on(step):
    assert retention.after(step, deleted=10, batch=10) is step
    assert retention.after(step, deleted=9, batch=10) == Step(step + 1)


def test_the_single_delete_steps_always_finish():
    assert retention.after(Step.ARCHIVE, deleted=0) is Step.VISIBILITY
    assert retention.after(Step.VISIBILITY, deleted=10, batch=10) is Step.HISTORY
    assert retention.after(Step.RUN, deleted=1, batch=1) is None
    assert retention.after(Step.RUN, deleted=0) is None  # already gone: done all the same


@pytest.mark.parametrize(
    ("text", "shown"),
    [("30s", "30s"), ("90s", "90s"), ("120s", "2m"), ("36h", "36h"), ("48h", "2d"), ("2w", "14d")],
)
def test_retention_durations_read_and_show_in_their_largest_exact_unit(text, shown):
    assert format_duration(parse_duration(text)) == shown
