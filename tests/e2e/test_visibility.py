"""Visibility through the official SDK and the `temporal` CLI: search attributes, list, count, scan."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import IndexedValueType, WorkflowTaskFailedCause
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import ListOpenWorkflowExecutionsRequest
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e import visibility_workflows as vw

TEMPORAL = str(Path(sys.executable).parent / "temporal")


async def _register(client) -> None:
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace="default",
            search_attributes={
                "PerduraCustomer": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
                "PerduraAmount": IndexedValueType.INDEXED_VALUE_TYPE_INT,
                "PerduraTags": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
            },
        )
    )


@pytest.fixture
async def tagged(client):
    """Five runs on a fresh task queue: three finished, two still waiting (stopped at teardown)."""
    await _register(client)
    task_queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        client, task_queue=task_queue, workflows=[vw.TaggedWorkflow, vw.BadUpsertWorkflow]
    ) as worker:
        handles = []
        for i in range(5):
            handle = await client.start_workflow(
                vw.TaggedWorkflow.run,
                args=[i * 10, i >= 3],
                id=f"vis-{uuid.uuid4()}",
                task_queue=task_queue,
                search_attributes=TypedSearchAttributes([SearchAttributePair(vw.CUSTOMER, f"c-{i % 2}")]),
                memo={"index": i},
            )
            handles.append(handle)
        for handle in handles[:3]:
            await handle.result()
        # The waiting runs have upserted once their first workflow task completed.
        for handle in handles[3:]:
            for _ in range(100):
                if vw.AMOUNT in (await handle.describe()).typed_search_attributes:
                    break
                await asyncio.sleep(0.05)
        yield task_queue, handles, worker
        for handle in handles[3:]:
            await handle.signal(vw.TaggedWorkflow.finish)
            await handle.result()


async def _ids(client, query: str, **kwargs) -> set[str]:
    return {w.id async for w in client.list_workflows(query, **kwargs)}


async def test_list_and_count_by_system_and_custom_attributes(client, tagged):
    task_queue, handles, _ = tagged
    ids = [h.id for h in handles]
    scope = f"TaskQueue = '{task_queue}'"
    assert await _ids(client, scope) == set(ids)
    assert await _ids(client, f"{scope} AND ExecutionStatus = 'Running'") == set(ids[3:])
    assert await _ids(client, f"{scope} AND PerduraCustomer = 'c-1'") == {ids[1], ids[3]}
    assert await _ids(client, f"{scope} AND PerduraAmount >= 20 AND PerduraAmount < 40") == {ids[2], ids[3]}
    assert await _ids(client, f"{scope} AND PerduraTags = 'upserted'") == set(ids)
    assert await _ids(client, f"{scope} AND WorkflowId IN ('{ids[0]}', '{ids[4]}')") == {ids[0], ids[4]}
    assert await _ids(client, f"{scope} AND NOT (PerduraAmount BETWEEN 10 AND 30)") == {ids[0], ids[4]}
    assert await _ids(client, f"{scope} AND CloseTime IS NULL") == set(ids[3:])
    assert await _ids(client, f"{scope} AND WorkflowId STARTS_WITH 'vis-'") == set(ids)

    count = await client.count_workflows(f"{scope} GROUP BY ExecutionStatus")
    assert count.count == 5
    assert sorted((g.group_values[0], g.count) for g in count.groups) == [("Completed", 3), ("Running", 2)]
    assert (await client.count_workflows(f"{scope} AND PerduraCustomer = 'c-0'")).count == 3


async def test_listing_returns_typed_attributes_memo_and_pages(client, tagged):
    task_queue, handles, _ = tagged
    listed = [w async for w in client.list_workflows(f"TaskQueue = '{task_queue}'", page_size=2)]
    assert len(listed) == 5
    assert len({w.run_id for w in listed}) == 5
    # Open runs first, then the most recently closed.
    assert [w.status for w in listed[:2]] == [WorkflowExecutionStatus.RUNNING] * 2
    by_id = {w.id: w for w in listed}
    first = by_id[handles[1].id]
    assert first.typed_search_attributes[vw.CUSTOMER] == "c-1"
    assert first.typed_search_attributes[vw.AMOUNT] == 10
    assert first.typed_search_attributes[vw.TAGS] == ["upserted"]
    assert await first.memo() == {"index": 1, "stage": "upserted"}
    assert first.close_time is not None
    assert first.history_length > 0
    limited = [w async for w in client.list_workflows(f"TaskQueue = '{task_queue}'", limit=3)]
    assert len(limited) == 3


async def test_legacy_open_listing(client, tagged):
    task_queue, handles, _ = tagged
    response = await client.workflow_service.list_open_workflow_executions(
        ListOpenWorkflowExecutionsRequest(namespace="default", maximum_page_size=1000)
    )
    open_ids = {e.execution.workflow_id for e in response.executions}
    assert {h.id for h in handles[3:]} <= open_ids
    assert not {h.id for h in handles[:3]} & open_ids


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("WorkflowId = 'x' OR 1=1 --", "syntax error at position 21"),
        ("(WorkflowId = 'x'", "unexpected end of query"),
        ("NoSuchAttribute = 'x'", "invalid search attribute: NoSuchAttribute"),
        ("PerduraAmount = 'ten'", "invalid value type for search attribute PerduraAmount of type Int"),
        ("StartTime > 'yesterday'", "unable to parse datetime"),
    ],
)
async def test_bad_queries_are_invalid_argument(client, query, fragment):
    await _register(client)
    with pytest.raises(RPCError) as caught:
        await client.count_workflows(query)
    assert caught.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert fragment in caught.value.message


async def test_start_with_unknown_or_mistyped_attribute_is_refused(client):
    await _register(client)
    for attrs, message in [
        (
            [SearchAttributePair(SearchAttributeKey.for_keyword("PerduraUnregistered"), "x")],
            "Namespace default has no mapping defined for search attribute PerduraUnregistered",
        ),
        (
            [SearchAttributePair(SearchAttributeKey.for_keyword("PerduraAmount"), "x")],
            "invalid value for search attribute PerduraAmount of type Int: x",
        ),
    ]:
        with pytest.raises(RPCError) as caught:
            await client.start_workflow(
                "Anything",
                id=f"vis-{uuid.uuid4()}",
                task_queue="nowhere",
                search_attributes=TypedSearchAttributes(attrs),
            )
        assert caught.value.status == RPCStatusCode.INVALID_ARGUMENT
        assert message in caught.value.message


async def test_upsert_of_unknown_attribute_fails_the_workflow_task(client, tagged):
    task_queue, _, _ = tagged
    handle = await client.start_workflow(
        vw.BadUpsertWorkflow.run, id=f"vis-{uuid.uuid4()}", task_queue=task_queue
    )
    for _ in range(100):
        failed = [
            e
            async for e in handle.fetch_history_events()
            if e.HasField("workflow_task_failed_event_attributes")
        ]
        if failed:
            break
        await asyncio.sleep(0.1)
    cause = failed[0].workflow_task_failed_event_attributes
    assert cause.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES
    assert "PerduraNeverRegistered" in cause.failure.message
    await handle.terminate()


async def test_operator_search_attributes_and_cli(client, server, tagged):
    task_queue, handles, _ = tagged
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace="default")
    )
    assert listed.custom_attributes["PerduraAmount"] == IndexedValueType.INDEXED_VALUE_TYPE_INT
    assert listed.system_attributes["WorkflowId"] == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD

    def cli(*args: str) -> str:
        done = subprocess.run(
            [TEMPORAL, *args, "--address", server.address, "--namespace", "default"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout

    rows = json.loads(
        cli(
            "workflow",
            "list",
            "--query",
            f"TaskQueue = '{task_queue}' AND PerduraCustomer = 'c-0'",
            "-o",
            "json",
        )
    )
    assert {r["execution"]["workflowId"] for r in rows} == {handles[0].id, handles[2].id, handles[4].id}
    counted = cli("workflow", "count", "--query", f"TaskQueue = '{task_queue}'")
    assert "Total: 5" in counted
    names = cli("operator", "search-attribute", "list")
    assert "PerduraTags" in names
    assert "KeywordList" in names
