"""The scheduler's pure rules: overlap policies, catchup window, limited actions, patches and closed runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.schedule.v1 import (
    BackfillRequest,
    IntervalSpec,
    Schedule,
    ScheduleInfo,
    SchedulePatch,
    ScheduleSpec,
    TriggerImmediatelyRequest,
)

from engine.schedules import rules
from engine.schedules.spec import compile_spec

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _record(every: int = 60, **policies) -> rules.ScheduleRecord:
    schedule = Schedule(spec=ScheduleSpec(interval=[IntervalSpec(interval={"seconds": every})]))
    for name, value in policies.items():
        if name == "catchup_window":
            schedule.policies.catchup_window.FromTimedelta(value)
        else:
            setattr(schedule.policies, name, value)
    rules.ensure_defaults(schedule)
    record = rules.ScheduleRecord(schedule=schedule, info=ScheduleInfo(), last_processed=T0)
    record.info.create_time.CopyFrom(rules.timestamp(T0))
    return record


def _start(n: int, overlap: int = rules.UNSPECIFIED) -> rules.BufferedStart:
    at = T0 + timedelta(minutes=n)
    return rules.BufferedStart(at, at, overlap, False, str(n))


def _plan(policy: int, count: int, running: bool) -> rules.BufferPlan:
    return rules.plan_buffer(
        [_start(i) for i in range(count)], running=running, resolve=lambda p: policy if p == 0 else p
    )


@pytest.mark.parametrize(
    ("policy", "running", "starts", "buffered", "skipped", "cancel", "terminate"),
    [
        (rules.SKIP, False, [0], [], 2, False, False),
        (rules.SKIP, True, [], [], 3, False, False),
        (rules.BUFFER_ONE, True, [], [0], 2, False, False),
        (rules.BUFFER_ONE, False, [0], [1], 1, False, False),
        (rules.BUFFER_ALL, True, [], [0, 1, 2], 0, False, False),
        (rules.CANCEL_OTHER, True, [], [0, 1, 2], 0, True, False),
        (rules.CANCEL_OTHER, False, [2], [], 0, False, False),
        (rules.TERMINATE_OTHER, True, [], [0, 1, 2], 0, False, True),
        (rules.ALLOW_ALL, True, [0, 1, 2], [], 0, False, False),
    ],
)
def test_overlap_policies(policy, running, starts, buffered, skipped, cancel, terminate):
    plan = _plan(policy, 3, running)
    chosen = [int(s.request_id) for s in plan.overlapping_starts]
    if plan.non_overlapping_start is not None:
        chosen.append(int(plan.non_overlapping_start.request_id))
    assert chosen == starts
    assert [int(s.request_id) for s in plan.new_buffer] == buffered
    assert plan.overlap_skipped == skipped
    assert plan.need_cancel is cancel
    assert plan.need_terminate is terminate


@given(
    policies=st.lists(st.sampled_from([1, 2, 3, 4, 5, 6]), min_size=0, max_size=12),
    running=st.booleans(),
)
def test_every_buffered_start_is_started_kept_or_skipped(policies, running):
    """Nothing is lost: each start is started, kept in the buffer, or counted as skipped (or replaced)."""
    buffer = [_start(i, p) for i, p in enumerate(policies)]
    plan = rules.plan_buffer(buffer, running=running, resolve=lambda p: p)
    started = len(plan.overlapping_starts) + (plan.non_overlapping_start is not None)
    replaced = (
        sum(1 for p in policies if p in (rules.CANCEL_OTHER, rules.TERMINATE_OTHER)) if not running else 0
    )
    if plan.need_cancel or plan.need_terminate:
        assert plan.overlapping_starts == []
    else:
        assert started + len(plan.new_buffer) + plan.overlap_skipped >= len(policies) - replaced
    if not running:
        assert not plan.need_cancel
        assert not plan.need_terminate


def test_time_range_buffers_due_times_and_counts_missed_catchup():
    record = _record(every=60, catchup_window=timedelta(minutes=3))
    spec = compile_spec(record.schedule.spec)
    rules.advance(record, spec, "", T0 + timedelta(minutes=10))
    # 10 times are due; the 6 older than the 3-minute window are missed (as in Temporal, minimum 10 s).
    assert [b.nominal for b in record.buffered] == [T0 + timedelta(minutes=m) for m in (7, 8, 9, 10)]
    assert record.info.missed_catchup_window == 6
    assert record.last_processed == T0 + timedelta(minutes=10)
    assert rules.next_wakeup(record, spec, "", record.last_processed) == T0 + timedelta(minutes=11)


def test_paused_and_limited_actions():
    record = _record()
    spec = compile_spec(record.schedule.spec)
    record.schedule.state.paused = True
    rules.advance(record, spec, "", T0 + timedelta(minutes=5))
    assert record.buffered == []
    assert rules.next_wakeup(record, spec, "", T0) is None
    record.schedule.state.paused = False
    record.schedule.state.limited_actions = True
    record.schedule.state.remaining_actions = 2
    assert rules.future_action_times(record, spec, "", 10) == [
        rules.timestamp(T0 + timedelta(minutes=m)) for m in (6, 7)
    ]
    assert rules.can_take_action(record, manual=False, decrement=True)
    assert rules.can_take_action(record, manual=False, decrement=True)
    assert not rules.can_take_action(record, manual=False)
    assert rules.can_take_action(record, manual=True)


def test_patch_trigger_backfill_pause():
    record = _record()
    spec = compile_spec(record.schedule.spec)
    now = T0 + timedelta(seconds=30)
    rules.apply_patch(
        record,
        SchedulePatch(
            trigger_immediately=TriggerImmediatelyRequest(overlap_policy=rules.ALLOW_ALL),
            backfill_request=[
                BackfillRequest(
                    start_time=rules.timestamp(T0 - timedelta(minutes=3)),
                    end_time=rules.timestamp(T0 - timedelta(minutes=1)),
                )
            ],
            pause="stop",
        ),
        now,
    )
    assert record.schedule.state.paused
    assert record.schedule.state.notes == "stop"
    assert record.conflict_token == 2
    assert [(b.nominal, b.manual) for b in record.buffered] == [(now, True)]
    rules.advance(record, spec, "", now)
    # Backfills are inclusive at both ends and ignore the pause.
    assert [b.nominal for b in record.buffered[1:]] == [T0 - timedelta(minutes=m) for m in (3, 2, 1)]
    assert record.backfills == []


def test_closed_run_carries_result_and_pauses_on_failure():
    record = _record(pause_on_failure=True)
    start = _start(0)
    rules.record_action(record, start, workflow_id="wf-a", run_id="r1", started_at=T0, track=True)
    assert [e.workflow_id for e in record.info.running_workflows] == ["wf-a"]
    rules.run_closed(
        record, rules.RunOutcome("wf-a", rules.Status.WORKFLOW_EXECUTION_STATUS_COMPLETED, result=b"res")
    )
    assert record.info.running_workflows == []
    assert record.last_completion_result == b"res"
    assert (
        record.info.recent_actions[0].start_workflow_status
        == rules.Status.WORKFLOW_EXECUTION_STATUS_COMPLETED
    )
    rules.record_action(record, start, workflow_id="wf-b", run_id="r2", started_at=T0, track=True)
    rules.run_closed(
        record,
        rules.RunOutcome(
            "wf-b", rules.Status.WORKFLOW_EXECUTION_STATUS_FAILED, failure=b"f", failure_message="boom"
        ),
    )
    assert record.schedule.state.paused
    assert record.schedule.state.notes == "paused due to workflow failure: wf-b: boom"
    assert record.last_completion_result == b"res"
    assert record.continued_failure == b"f"


def test_workflow_ids_and_search_attributes():
    nominal = datetime(2026, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    assert rules.scheduled_workflow_id("wf", nominal) == "wf-2026-05-06T07:08:09Z"
    attrs = rules.action_search_attributes(None, schedule_id="sched-1", nominal=nominal)
    assert rules.scheduled_by(attrs.SerializeToString()) == "sched-1"
    assert rules.scheduled_by(b"") is None


def test_record_round_trip():
    record = _record()
    record.buffered.append(_start(1, rules.BUFFER_ALL))
    record.last_completion_result = b"\x00\x01"
    again = rules.load(rules.dump(record))
    assert again.schedule == record.schedule
    assert again.buffered == record.buffered
    assert again.last_completion_result == record.last_completion_result


def test_a_backfill_from_the_calendars_first_instant_is_taken_not_an_overflow():
    """A backfill from 0001-01-01 overflowed datetime in PatchSchedule (INTERNAL); the real server takes it."""
    from google.protobuf.timestamp_pb2 import Timestamp

    record = _record()
    first = Timestamp(seconds=-62135596800)
    rules.apply_patch(
        record,
        SchedulePatch(backfill_request=[BackfillRequest(start_time=first, end_time=rules.timestamp(T0))]),
        T0,
    )
    assert [b.start.year for b in record.backfills] == [1]
