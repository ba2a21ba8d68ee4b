"""Where Perdura's daylight-saving rule for schedules differs from Temporal's, against the real dev server.

Temporal never fires a local time that a spring-forward jump skips. A local time that a fall-back repeats
it fires twice in New York (01:30 EDT and 01:30 EST) but once in Berlin, at the second occurrence for a
daily 02:30 and at the first for an hourly one: its calendar (service/worker/scheduler/calendar.go) builds
wall times with Go's time.Date, which resolves an ambiguous time by the offset in force at the wall time
read as UTC, so zones east of UTC get the later instant and zones west of it the earlier, and then adds an
hour when the previous match was in the first pass. Perdura fires a skipped time once, when the gap ends,
and a repeated time once, at its first occurrence, in every zone. Away from the transitions both agree."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
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

pytestmark = pytest.mark.reference


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# (zone, cron, window start, window end, the real server's times, Perdura's times), in UTC.
CASES = [
    (  # Berlin falls back on 2026-10-25 at 03:00 CEST to 02:00 CET.
        "Europe/Berlin",
        "30 2 * * *",
        _utc(2026, 10, 24),
        _utc(2026, 10, 26, 12),
        [_utc(2026, 10, 24, 0, 30), _utc(2026, 10, 25, 1, 30), _utc(2026, 10, 26, 1, 30)],
        [_utc(2026, 10, 24, 0, 30), _utc(2026, 10, 25, 0, 30), _utc(2026, 10, 26, 1, 30)],
    ),
    (  # Berlin springs forward on 2026-03-29 at 02:00 CET to 03:00 CEST (01:00 UTC).
        "Europe/Berlin",
        "30 2 * * *",
        _utc(2026, 3, 28),
        _utc(2026, 3, 30, 12),
        [_utc(2026, 3, 28, 1, 30), _utc(2026, 3, 30, 0, 30)],
        [_utc(2026, 3, 28, 1, 30), _utc(2026, 3, 29, 1, 0), _utc(2026, 3, 30, 0, 30)],
    ),
    (  # New York falls back on 2026-11-01 at 02:00 EDT to 01:00 EST.
        "America/New_York",
        "30 1 * * *",
        _utc(2026, 10, 31),
        _utc(2026, 11, 2, 12),
        [
            _utc(2026, 10, 31, 5, 30),
            _utc(2026, 11, 1, 5, 30),
            _utc(2026, 11, 1, 6, 30),
            _utc(2026, 11, 2, 6, 30),
        ],
        [_utc(2026, 10, 31, 5, 30), _utc(2026, 11, 1, 5, 30), _utc(2026, 11, 2, 6, 30)],
    ),
    (  # Hourly over New York's fall-back: 01:00 EDT and 01:00 EST on Temporal.
        "America/New_York",
        "0 * * * *",
        _utc(2026, 11, 1, 3),
        _utc(2026, 11, 1, 8),
        [_utc(2026, 11, 1, h) for h in (4, 5, 6, 7, 8)],
        [_utc(2026, 11, 1, h) for h in (4, 5, 7, 8)],
    ),
    (  # Hourly over New York's spring-forward: the skipped 02:00 is 03:00's instant, fired once by both.
        "America/New_York",
        "0 * * * *",
        _utc(2026, 3, 8, 5),
        _utc(2026, 3, 8, 9),
        [_utc(2026, 3, 8, h) for h in (6, 7, 8, 9)],
        [_utc(2026, 3, 8, h) for h in (6, 7, 8, 9)],
    ),
]


def _ts(when: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(when)
    return out


async def _create(client, sid: str, cron: str, zone: str):
    return await client.create_schedule(
        sid,
        Schedule(
            action=ScheduleActionStartWorkflow("NeverPolled", id=f"{sid}-wf", task_queue=f"{sid}-tq"),
            spec=ScheduleSpec(cron_expressions=[cron], time_zone_name=zone),
            state=ScheduleState(paused=True),
        ),
    )


async def _matching(client, sid: str, start: datetime, end: datetime) -> list[datetime]:
    response = await client.workflow_service.list_schedule_matching_times(
        ListScheduleMatchingTimesRequest(
            namespace="default", schedule_id=sid, start_time=_ts(start), end_time=_ts(end)
        )
    )
    return [t.ToDatetime(UTC) for t in response.start_time]


@pytest.mark.parametrize(("zone", "cron", "start", "end", "temporal", "perdura"), CASES)
async def test_matching_times_across_transitions(both_clients, zone, cron, start, end, temporal, perdura):
    sid = f"dst-{uuid.uuid4().hex[:10]}"
    handles = await asyncio.gather(*(_create(c, sid, cron, zone) for c in both_clients.values()))
    seen = {name: await _matching(c, sid, start, end) for name, c in both_clients.items()}
    assert seen == {"temporal": temporal, "perdura": perdura}
    for handle in handles:
        await handle.delete()


async def test_backfill_over_a_fall_back_night(both_clients):
    """Over New York's fall-back night Temporal starts two runs for 01:30; Perdura one."""
    sid = f"dstb-{uuid.uuid4().hex[:10]}"
    backfill = ScheduleBackfill(
        start_at=_utc(2026, 10, 31, 12),
        end_at=_utc(2026, 11, 1, 12),
        overlap=ScheduleOverlapPolicy.ALLOW_ALL,
    )
    counts: dict[str, list[datetime]] = {}
    for name, client in both_clients.items():
        handle = await _create(client, sid, "30 1 * * *", "America/New_York")
        await handle.backfill(backfill)
        deadline = asyncio.get_running_loop().time() + 30  # the real server backfills asynchronously
        while True:
            desc = await handle.describe()
            if desc.info.num_actions >= (2 if name == "temporal" else 1):
                break
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.2)
        await asyncio.sleep(1 if name == "perdura" else 0)  # a second action on Perdura would show by now
        desc = await handle.describe()
        counts[name] = sorted(a.scheduled_at for a in desc.info.recent_actions)
        for action in desc.info.recent_actions:
            await client.get_workflow_handle(action.action.workflow_id).terminate("test over")
        await handle.delete()
    assert counts == {
        "temporal": [_utc(2026, 11, 1, 5, 30), _utc(2026, 11, 1, 6, 30)],
        "perdura": [_utc(2026, 11, 1, 5, 30)],
    }
