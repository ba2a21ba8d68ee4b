"""Differential CountSchedules test: the same schedules on the real Temporal dev server and on `perdura dev`,
the same counts (and the same ids from ListSchedules) for each filter, and the same refusals.

The real server indexes schedules asynchronously, so the test first waits until it counts all of them.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import CountSchedulesRequest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

pytestmark = pytest.mark.reference

CUSTOMER = SearchAttributeKey.for_keyword("PerduraCustomer")

# (paused, customer) of each schedule, in id order.
SCHEDULES = [(True, "c-0"), (False, "c-1"), (False, "c-1"), (True, None)]

# Filters (each ANDed with the test's ScheduleId prefix) whose counts must agree; `{p}` is the prefix.
QUERIES = [
    "",
    "TemporalSchedulePaused = true",
    "TemporalSchedulePaused = false",
    "PerduraCustomer = 'c-1'",
    "PerduraCustomer != 'c-1'",
    "PerduraCustomer IS NULL",
    "TemporalSchedulePaused = true AND PerduraCustomer = 'c-0'",
    "TemporalSchedulePaused = false OR PerduraCustomer = 'c-0'",
    "ScheduleId = '{p}-2'",
    "ScheduleId IN ('{p}-0', '{p}-3', '{p}-9')",
]

# Filters both servers refuse, whole: system attributes other than ScheduleId and TemporalSchedulePaused
# describe the scheduler's hidden run, and GROUP BY takes only ExecutionStatus, one of those.
REFUSED_SAME_MESSAGE = [
    "WorkflowType = 'x'",
    "TemporalSchedulePaused = true OR WorkflowId = 'x'",
    "GROUP BY ExecutionStatus",
    "ExecutionStatus = 'Running' GROUP BY ExecutionStatus",
    "GROUP BY TemporalSchedulePaused",
]
REFUSED = [
    *REFUSED_SAME_MESSAGE,
    "NoSuchAttribute = 'x'",
    "(TemporalSchedulePaused = true",
    "TemporalSchedulePaused = 'yes'",
    "TemporalSchedulePaused = true LIMIT 3",
    "TemporalSchedulePaused = true ORDER BY ScheduleId",
]


async def _setup(client: Client, prefix: str) -> None:
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace="default",
                search_attributes={CUSTOMER.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
            )
        )
    except RPCError as e:
        if e.status != RPCStatusCode.ALREADY_EXISTS:
            raise
    for i, (paused, customer) in enumerate(SCHEDULES):
        await client.create_schedule(
            f"{prefix}-{i}",
            Schedule(
                action=ScheduleActionStartWorkflow("Never", id=f"{prefix}-wf-{i}", task_queue=prefix),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=7))]),
                state=ScheduleState(paused=paused),
            ),
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(CUSTOMER, customer)] if customer else []
            ),
        )


async def _count(client: Client, query: str) -> int:
    response = await client.workflow_service.count_schedules(
        CountSchedulesRequest(namespace="default", query=query)
    )
    # Neither server groups schedule counts (see REFUSED_SAME_MESSAGE).
    assert not response.groups
    return response.count


async def _settled(client: Client, scope: str) -> None:
    """Wait until the server counts and lists all the test's schedules, their state and their attributes.

    A custom attribute just added may be unknown to the real server's query path for a moment: such a
    count is refused, and retried like one that is still short. The real server's list can lag behind its
    count (it once counted two paused schedules and listed one), so both are waited for.
    """
    paused = sum(1 for p, _ in SCHEDULES if p)
    expected: dict[str, object] = {
        scope: (len(SCHEDULES),) * 2,
        f"{scope} AND TemporalSchedulePaused = true": (paused,) * 2,
        f"{scope} AND TemporalSchedulePaused = false": (len(SCHEDULES) - paused,) * 2,
        f"{scope} AND PerduraCustomer = 'c-1'": (2, 2),
    }
    seen: dict[str, object] = {}
    deadline = asyncio.get_running_loop().time() + 60  # a loaded machine indexes slowly
    while asyncio.get_running_loop().time() < deadline:
        for query in expected:
            try:
                seen[query] = (
                    await _count(client, query),
                    len([s async for s in await client.list_schedules(query)]),
                )
            except RPCError as e:
                seen[query] = e.message
        if seen == expected:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the schedules never all showed in the count: {seen}")


async def _answers(client: Client, prefix: str) -> dict[str, object]:
    scope = f"ScheduleId STARTS_WITH '{prefix}-'"
    await _settled(client, scope)
    out: dict[str, object] = {}
    for query in QUERIES:
        text = f"{scope} AND ({query.format(p=prefix)})" if query else scope
        listed = sorted([s.id async for s in await client.list_schedules(text)])
        out[query] = (await _count(client, text), listed)
    for query in REFUSED:
        try:
            await _count(client, query)
            out[query] = "accepted"
        except RPCError as e:
            out[query] = (RPCStatusCode(e.status).name, e.message if query in REFUSED_SAME_MESSAGE else "")
    return out


async def test_count_schedules_same_answers_as_temporal(both_clients):
    """Each filter counts (and lists) the same schedules on both servers; the bad ones are refused alike."""
    prefix = f"cnt-{uuid.uuid4().hex[:8]}"
    await asyncio.gather(*(_setup(c, prefix) for c in both_clients.values()))
    temporal, perdura = await asyncio.gather(
        _answers(both_clients["temporal"], prefix), _answers(both_clients["perdura"], prefix)
    )
    differences = {q: (temporal[q], perdura[q]) for q in temporal if temporal[q] != perdura[q]}
    assert not differences, differences
    # The answers are the schedules' own: a count that ignored the filter could not agree with these.
    assert temporal["TemporalSchedulePaused = true"] == (2, [f"{prefix}-0", f"{prefix}-3"])
    assert temporal["PerduraCustomer = 'c-1'"] == (2, [f"{prefix}-1", f"{prefix}-2"])
    assert all(temporal[q][0] == "INVALID_ARGUMENT" for q in REFUSED)
