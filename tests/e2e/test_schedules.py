"""Schedules through the SDK's schedule API: specs, firing, overlap policies, backfills, pause and results."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio import workflow
from temporalio.api.workflowservice.v1 import ListScheduleMatchingTimesRequest
from temporalio.client import (
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    WorkflowExecutionStatus,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker


@workflow.defn
class ScheduledResultWorkflow:
    @workflow.run
    async def run(self) -> str:
        last = workflow.get_last_completion_result(type_hint=str)
        return f"after {last}" if last is not None else "first"


@workflow.defn
class ScheduledWaitWorkflow:
    def __init__(self) -> None:
        self.done = False

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        return "finished"


@workflow.defn
class ScheduledFailWorkflow:
    @workflow.run
    async def run(self) -> None:
        raise ApplicationError("broken on purpose", non_retryable=True)


@pytest.fixture
async def sched_worker(client):
    task_queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[ScheduledResultWorkflow, ScheduledWaitWorkflow, ScheduledFailWorkflow],
    ) as running:
        yield running


def _action(workflow_run, task_queue: str) -> ScheduleActionStartWorkflow:
    return ScheduleActionStartWorkflow(workflow_run, id=f"sched-wf-{uuid.uuid4()}", task_queue=task_queue)


def _sid() -> str:
    return f"schedule-{uuid.uuid4()}"


async def _eventually(check, timeout: float = 15.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.2)


async def test_create_describe_list_delete(client, sched_worker):
    """The spec comes back canonical (cron as a calendar), with defaults, future times and the memo."""
    handle = await client.create_schedule(
        _sid(),
        Schedule(
            action=_action(ScheduledResultWorkflow.run, sched_worker.task_queue),
            spec=ScheduleSpec(
                intervals=[ScheduleIntervalSpec(every=timedelta(hours=1), offset=timedelta(minutes=5))],
                cron_expressions=["30 2 * * MON-FRI"],
                skip=[ScheduleCalendarSpec(year=(ScheduleRange(2099),))],
                time_zone_name="Europe/Paris",
            ),
            state=ScheduleState(paused=True, note="made paused"),
        ),
        memo={"owner": "team-a"},
    )
    desc = await handle.describe()
    assert desc.schedule.state.paused
    assert desc.schedule.state.note == "made paused"
    assert desc.schedule.spec.cron_expressions == []
    assert desc.schedule.spec.calendars == [
        ScheduleCalendarSpec(
            second=(ScheduleRange(0),),
            minute=(ScheduleRange(30),),
            hour=(ScheduleRange(2),),
            day_of_month=(ScheduleRange(1, 31),),
            month=(ScheduleRange(1, 12),),
            day_of_week=(ScheduleRange(1, 5),),
        )
    ]
    assert desc.schedule.spec.time_zone_name == "Europe/Paris"
    assert desc.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert desc.schedule.policy.catchup_window == timedelta(days=365)
    assert await desc.memo_value("owner") == "team-a"
    times = desc.info.next_action_times
    assert len(times) == 10
    assert times == sorted(times)
    assert all(t.minute == 5 or (t.minute == 30) for t in times)
    assert desc.info.num_actions == 0

    with pytest.raises(ScheduleAlreadyRunningError):
        await client.create_schedule(handle.id, desc.schedule)

    ids = [d.id async for d in await client.list_schedules()]
    assert handle.id in ids
    listed = [d async for d in await client.list_schedules() if d.id == handle.id][0]
    assert listed.schedule is not None
    assert listed.schedule.state.paused
    assert listed.schedule.state.note == "made paused"
    assert listed.schedule.action.workflow == "ScheduledResultWorkflow"
    assert len(listed.info.next_action_times) == 5

    await handle.delete()
    with pytest.raises(RPCError) as info:
        await handle.describe()
    assert info.value.status == RPCStatusCode.NOT_FOUND
    assert handle.id not in [d.id async for d in await client.list_schedules()]


async def test_bad_specs_are_refused(client, sched_worker):
    for spec, text in [
        (ScheduleSpec(cron_expressions=["* * *"]), "CronString does not have 5-7 fields"),
        (
            ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(milliseconds=10))]),
            "interval is too small",
        ),
        (ScheduleSpec(cron_expressions=["61 * * * *"]), "Minute is not in range [0-59]"),
        (ScheduleSpec(time_zone_name="Mars/Olympus"), "unknown time zone Mars/Olympus"),
    ]:
        with pytest.raises(RPCError) as info:
            await client.create_schedule(
                _sid(),
                Schedule(action=_action(ScheduledResultWorkflow.run, sched_worker.task_queue), spec=spec),
            )
        assert info.value.status == RPCStatusCode.INVALID_ARGUMENT
        assert info.value.message.startswith("Invalid schedule spec: ")
        assert text in info.value.message


async def test_interval_fires_durably_and_carries_results(client, sched_worker):
    """Every second a run starts, named `<id>-<time>`, tagged with the schedule, seeing the last result."""
    action = _action(ScheduledResultWorkflow.run, sched_worker.task_queue)
    handle = await client.create_schedule(
        _sid(),
        Schedule(
            action=action, spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))])
        ),
    )
    try:

        async def two_done():
            desc = await handle.describe()
            closed = [
                a
                for a in desc.info.recent_actions
                if (await client.get_workflow_handle(a.action.workflow_id).describe()).status
                == WorkflowExecutionStatus.COMPLETED
            ]
            return desc if len(closed) >= 2 else None

        desc = await _eventually(two_done)
    finally:
        await handle.pause()
    first = desc.info.recent_actions[0]
    assert isinstance(first.action, ScheduleActionExecutionStartWorkflow)
    stamp = first.scheduled_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert first.action.workflow_id == f"{action.id}-{stamp}"
    run = client.get_workflow_handle(first.action.workflow_id)
    described = await run.describe()
    assert described.search_attributes["TemporalScheduledById"] == [handle.id]
    assert "TemporalScheduledStartTime" in described.search_attributes
    second = desc.info.recent_actions[1].action
    assert await client.get_workflow_handle(second.workflow_id).result() in ("after first", "first")
    results = {
        await client.get_workflow_handle(a.action.workflow_id).result() for a in desc.info.recent_actions
    }
    assert "after first" in results
    await handle.delete()


async def test_trigger_pause_and_limited_actions(client, sched_worker):
    handle = await client.create_schedule(
        _sid(),
        Schedule(
            action=_action(ScheduledResultWorkflow.run, sched_worker.task_queue),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))]),
            state=ScheduleState(limited_actions=True, remaining_actions=1),
        ),
    )

    async def one_action():
        desc = await handle.describe()
        return desc if desc.info.num_actions == 1 else None

    desc = await _eventually(one_action)
    await asyncio.sleep(2.5)
    desc = await handle.describe()
    assert desc.info.num_actions == 1
    assert desc.schedule.state.remaining_actions == 0
    assert desc.info.next_action_times == []
    # A manual trigger does not need remaining actions.
    await handle.pause(note="hold")
    desc = await handle.describe()
    assert desc.schedule.state.paused
    assert desc.schedule.state.note == "hold"
    await handle.trigger()
    desc = await handle.describe()
    assert desc.info.num_actions == 2
    await handle.unpause(note="go")
    desc = await handle.describe()
    assert not desc.schedule.state.paused
    assert desc.schedule.state.note == "go"
    await handle.delete()


async def test_buffer_one_waits_for_the_running_workflow(client, sched_worker):
    """BUFFER_ONE keeps one start while a run goes on, skips the rest, and starts it when the run closes."""
    handle = await client.create_schedule(
        _sid(),
        Schedule(
            action=_action(ScheduledWaitWorkflow.run, sched_worker.task_queue),
            spec=ScheduleSpec(),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.BUFFER_ONE),
        ),
    )
    for _ in range(3):
        await handle.trigger()
        await asyncio.sleep(1.1)  # distinct second, distinct workflow id
    desc = await handle.describe()
    assert desc.info.num_actions == 1
    assert desc.info.num_actions_skipped_overlap == 1
    assert len(desc.info.running_actions) == 1
    first = desc.info.running_actions[0].workflow_id
    await client.get_workflow_handle(first).signal(ScheduledWaitWorkflow.finish)

    async def second_started():
        d = await handle.describe()
        return d if d.info.num_actions == 2 else None

    desc = await _eventually(second_started)
    assert desc.info.running_actions[0].workflow_id != first
    assert desc.info.recent_actions[0].action.workflow_id == first
    await client.get_workflow_handle(desc.info.running_actions[0].workflow_id).signal(
        ScheduledWaitWorkflow.finish
    )
    await handle.delete()


async def test_terminate_other_replaces_the_running_workflow(client, sched_worker):
    handle = await client.create_schedule(
        _sid(),
        Schedule(
            action=_action(ScheduledWaitWorkflow.run, sched_worker.task_queue),
            spec=ScheduleSpec(),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.TERMINATE_OTHER),
        ),
    )
    await handle.trigger()
    first = (await handle.describe()).info.running_actions[0].workflow_id
    await asyncio.sleep(1.1)
    await handle.trigger()
    desc = await handle.describe()
    assert desc.info.num_actions == 2
    assert (await client.get_workflow_handle(first).describe()).status == WorkflowExecutionStatus.TERMINATED
    second = desc.info.running_actions[0].workflow_id
    assert second != first
    await client.get_workflow_handle(second).terminate()
    await handle.delete()


async def test_backfill_is_inclusive_and_allow_all(client, sched_worker):
    begin = datetime(2024, 1, 20, 5, 0, tzinfo=UTC)
    handle = await client.create_schedule(
        _sid(),
        Schedule(
            action=_action(ScheduledResultWorkflow.run, sched_worker.task_queue),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(minutes=1))]),
            state=ScheduleState(paused=True),
        ),
        backfill=[
            ScheduleBackfill(
                start_at=begin, end_at=begin + timedelta(minutes=2), overlap=ScheduleOverlapPolicy.ALLOW_ALL
            )
        ],
    )
    desc = await handle.describe()
    assert desc.info.num_actions == 3
    assert [a.scheduled_at for a in desc.info.recent_actions] == [
        begin + timedelta(minutes=i) for i in range(3)
    ]
    assert desc.info.running_actions == []  # allow-all runs are not tracked
    await handle.backfill(
        ScheduleBackfill(start_at=begin + timedelta(hours=1), end_at=begin + timedelta(hours=1))
    )
    desc = await handle.describe()
    assert desc.info.num_actions == 4
    await handle.delete()


async def test_pause_on_failure(client, sched_worker):
    handle = await client.create_schedule(
        _sid(),
        Schedule(
            action=_action(ScheduledFailWorkflow.run, sched_worker.task_queue),
            spec=ScheduleSpec(),
            policy=SchedulePolicy(pause_on_failure=True),
        ),
    )
    await handle.trigger()
    workflow_id = (await handle.describe()).info.recent_actions[0].action.workflow_id

    async def paused():
        d = await handle.describe()
        return d if d.schedule.state.paused else None

    desc = await _eventually(paused)
    assert desc.schedule.state.note == f"paused due to workflow failure: {workflow_id}: broken on purpose"
    assert desc.info.recent_actions[0].action.workflow_id == workflow_id
    assert desc.info.running_actions == []
    await handle.delete()


async def test_update_and_matching_times(client, sched_worker):
    handle = await client.create_schedule(
        _sid(),
        Schedule(
            action=_action(ScheduledResultWorkflow.run, sched_worker.task_queue),
            spec=ScheduleSpec(cron_expressions=["0 12 * * *"]),
            state=ScheduleState(paused=True),
        ),
    )
    created = (await handle.describe()).info.created_at

    def change(input):
        input.description.schedule.spec = ScheduleSpec(
            calendars=[ScheduleCalendarSpec(hour=(ScheduleRange(6),), day_of_week=(ScheduleRange(0),))]
        )
        return ScheduleUpdate(schedule=input.description.schedule)

    await handle.update(change)
    desc = await handle.describe()
    assert desc.info.last_updated_at is not None
    assert desc.info.last_updated_at >= created
    assert all(t.hour == 6 and t.weekday() == 6 for t in desc.info.next_action_times)
    response = await client.workflow_service.list_schedule_matching_times(
        ListScheduleMatchingTimesRequest(
            namespace=client.namespace,
            schedule_id=handle.id,
            start_time=Timestamp(seconds=1735689600),
            end_time=Timestamp(seconds=1738368000),
        )
    )
    # Sundays of January 2025 at 06:00 UTC.
    assert [t.ToDatetime(UTC).day for t in response.start_time] == [5, 12, 19, 26]
    await handle.delete()


async def test_schedule_fires_after_a_dev_server_restart(tmp_path):
    """The schedule row is the truth: times missed while the server was down are caught up on restart."""
    from temporalio.client import Client

    from tests.support import servers

    port = servers.free_port()
    db = tmp_path / "dev.sqlite3"
    schedule_id = _sid()
    with servers.dev_server(tmp_path, db_file=db, port=port) as dev:
        client = await Client.connect(dev.address)
        handle = await client.create_schedule(
            schedule_id,
            Schedule(
                action=_action("NoWorkerWorkflow", f"tq-{uuid.uuid4()}"),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))]),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
            ),
        )

        async def fired():
            return (await handle.describe()).info.num_actions >= 1

        await _eventually(fired)
        before = (await handle.describe()).info.num_actions
    await asyncio.sleep(3)
    with servers.dev_server(tmp_path, db_file=db, port=port) as dev:
        client = await Client.connect(dev.address)
        handle = client.get_schedule_handle(schedule_id)

        async def caught_up():
            return (await handle.describe()).info.num_actions >= before + 3

        await _eventually(caught_up)
        desc = await handle.describe()
        times = [a.scheduled_at for a in desc.info.recent_actions]
        assert times == sorted(times)
        assert len(set(times)) == len(times)
        await handle.delete()


async def test_list_filters_and_typed_search_attributes(client, sched_worker):
    """ListSchedules takes the list-filter language over the schedules' attributes; unknown ones are refused."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
    from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

    team = SearchAttributeKey.for_keyword("PerduraScheduleTeam")
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace="default",
            search_attributes={team.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
        )
    )
    label = f"team-{uuid.uuid4()}"
    handles = []
    for paused in (False, True):
        handles.append(
            await client.create_schedule(
                _sid(),
                Schedule(
                    action=_action(ScheduledResultWorkflow.run, sched_worker.task_queue),
                    spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
                    state=ScheduleState(paused=paused),
                ),
                search_attributes=TypedSearchAttributes([SearchAttributePair(team, label)]),
            )
        )

    async def listed(query: str) -> set[str]:
        return {d.id async for d in await client.list_schedules(query=query)}

    assert await listed(f"PerduraScheduleTeam = '{label}'") == {h.id for h in handles}
    assert await listed(f"PerduraScheduleTeam = '{label}' AND TemporalSchedulePaused = true") == {
        handles[1].id
    }
    entry = [d async for d in await client.list_schedules(query=f"PerduraScheduleTeam = '{label}'")][0]
    assert entry.typed_search_attributes.get(team) == label  # typed by the server, as a start's are
    with pytest.raises(RPCError) as info:
        await listed("NoSuchAttribute = 'x'")
    assert info.value.status == RPCStatusCode.INVALID_ARGUMENT
    for handle in handles:
        await handle.delete()
