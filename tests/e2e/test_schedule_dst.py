"""Perdura's daylight-saving rule seen through the official SDK: ListScheduleMatchingTimes and a backfill
over Europe/Berlin's and America/New_York's transitions fire a skipped local time once, at the end of the
gap, and a repeated local time once (tests/unit/test_schedule_dst.py has the rule's cases)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.workflowservice.v1 import ListScheduleMatchingTimesRequest
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleOverlapPolicy,
    ScheduleSpec,
    ScheduleState,
)


def _ts(when: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(when)
    return out


async def _matching(client, schedule_id: str, start: datetime, end: datetime, zone: str) -> list[str]:
    response = await client.workflow_service.list_schedule_matching_times(
        ListScheduleMatchingTimesRequest(
            namespace=client.namespace, schedule_id=schedule_id, start_time=_ts(start), end_time=_ts(end)
        )
    )
    return [
        t.ToDatetime(UTC).astimezone(ZoneInfo(zone)).strftime("%m-%d %H:%M%z") for t in response.start_time
    ]


async def _schedule(client, cron: str, zone: str):
    sid = f"dst-{uuid.uuid4().hex[:10]}"
    return await client.create_schedule(
        sid,
        Schedule(
            action=ScheduleActionStartWorkflow("NeverPolled", id=f"{sid}-wf", task_queue=f"{sid}-tq"),
            spec=ScheduleSpec(cron_expressions=[cron], time_zone_name=zone),
            state=ScheduleState(paused=True),
        ),
    )


async def test_matching_times_across_both_transitions(client):
    berlin = await _schedule(client, "30 2 * * *", "Europe/Berlin")
    spring = await _matching(
        client,
        berlin.id,
        datetime(2026, 3, 28, tzinfo=UTC),
        datetime(2026, 3, 30, 12, tzinfo=UTC),
        "Europe/Berlin",
    )
    assert spring == ["03-28 02:30+0100", "03-29 03:00+0200", "03-30 02:30+0200"]
    fall = await _matching(
        client,
        berlin.id,
        datetime(2026, 10, 24, tzinfo=UTC),
        datetime(2026, 10, 26, 12, tzinfo=UTC),
        "Europe/Berlin",
    )
    assert fall == ["10-24 02:30+0200", "10-25 02:30+0200", "10-26 02:30+0100"]
    hourly = await _schedule(client, "0 * * * *", "America/New_York")
    assert await _matching(
        client,
        hourly.id,
        datetime(2026, 11, 1, 4, 30, tzinfo=UTC),
        datetime(2026, 11, 1, 8, 30, tzinfo=UTC),
        "America/New_York",
    ) == ["11-01 01:00-0400", "11-01 02:00-0500", "11-01 03:00-0500"]
    assert await _matching(
        client,
        hourly.id,
        datetime(2026, 3, 8, 5, 30, tzinfo=UTC),
        datetime(2026, 3, 8, 8, 30, tzinfo=UTC),
        "America/New_York",
    ) == ["03-08 01:00-0500", "03-08 03:00-0400", "03-08 04:00-0400"]
    await berlin.delete()
    await hourly.delete()


async def test_backfill_over_a_fall_back_starts_one_run(client):
    handle = await _schedule(client, "30 2 * * *", "Europe/Berlin")
    await handle.backfill(
        ScheduleBackfill(
            start_at=datetime(2026, 10, 24, 12, tzinfo=UTC),
            end_at=datetime(2026, 10, 25, 12, tzinfo=UTC),
            overlap=ScheduleOverlapPolicy.ALLOW_ALL,
        )
    )
    desc = await handle.describe()
    assert desc.info.num_actions == 1  # Temporal starts two: 02:30 summer time and 02:30 winter time
    assert [a.scheduled_at for a in desc.info.recent_actions] == [datetime(2026, 10, 25, 0, 30, tzinfo=UTC)]
    for action in desc.info.recent_actions:
        await client.get_workflow_handle(action.action.workflow_id).terminate("test over")
    await handle.delete()
