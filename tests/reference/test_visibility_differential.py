"""Differential visibility test: the same runs on the real Temporal dev server and on `perdura dev`, the
same list and count queries, the same answers (and the same queries refused as InvalidArgument).

The real server indexes visibility asynchronously, so the test first waits until it shows every run in
its final state; Perdura writes the record in the run's own transaction.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e import visibility_workflows as vw

pytestmark = pytest.mark.reference

CUSTOM = {
    "PerduraCustomer": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "PerduraAmount": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "PerduraTags": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
    "PerduraFlag": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "PerduraScore": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "PerduraWhen": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
}
FLAG = SearchAttributeKey.for_bool("PerduraFlag")
SCORE = SearchAttributeKey.for_float("PerduraScore")
WHEN = SearchAttributeKey.for_datetime("PerduraWhen")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

# Filters (each ANDed with the run set's TaskQueue) whose answers must agree.
QUERIES = [
    "",
    "ExecutionStatus = 'Running'",
    "ExecutionStatus != 'Running'",
    "ExecutionStatus IN ('Completed', 'Terminated')",
    "PerduraCustomer = 'c-1'",
    "PerduraCustomer != 'c-1'",
    "NOT (PerduraCustomer = 'c-1')",
    "PerduraCustomer IS NULL",
    "PerduraCustomer IS NOT NULL",
    "PerduraCustomer IN ('c-0', 'c-2')",
    "PerduraCustomer NOT IN ('c-0')",
    "PerduraAmount > 20",
    "PerduraAmount BETWEEN 10 AND 40",
    "PerduraAmount NOT BETWEEN 10 AND 40",
    "PerduraAmount <= 30 OR PerduraFlag = true",
    "PerduraTags = 'upserted'",
    "PerduraTags IN ('nothing', 'upserted')",
    "PerduraFlag = false",
    "PerduraFlag != true",
    "PerduraScore >= 1.5",
    "PerduraWhen < '2026-01-01T00:00:03Z'",
    # Bounds between the values: the dev server's SQLite store compares times as text, so a bound equal
    # to a stored time may miss it there (Perdura's BETWEEN includes both ends, as on Postgres).
    "PerduraWhen BETWEEN '2026-01-01T00:00:00.5Z' AND '2026-01-01T00:00:04.5Z'",
    "CloseTime IS NULL",
    "CloseTime IS NOT NULL AND ExecutionStatus = 'Completed'",
    "(PerduraAmount < 20 OR PerduraCustomer = 'c-2') AND ExecutionStatus = 'Running'",
    "NOT (ExecutionStatus = 'Running' AND PerduraAmount > 10)",
    "`PerduraCustomer` = 'c-0' AND HistoryLength > 0",
    "ParentWorkflowId IS NULL",
    "ExecutionStatus = 'Terminated' AND WorkflowType = 'TaggedWorkflow'",
]
BAD_QUERIES = [
    "WorkflowId = 'x' OR 1=1 --",
    "(WorkflowId = 'x'",
    "NoSuchAttribute = 'x'",
    "PerduraAmount = 'ten'",
    "StartTime > '2020-01-01'",
    "ExecutionStatus = 'Bogus'",
    "WorkflowId = 5",
    "WorkflowId = 'a' LIMIT 5",
    "WorkflowId",
    "PerduraCustomer LIKE 'c%'",
]


async def _setup(client: Client, task_queue: str, prefix: str) -> list[str]:
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(namespace="default", search_attributes=CUSTOM)
    )
    ids = []
    async with Worker(client, task_queue=task_queue, workflows=[vw.TaggedWorkflow]):
        handles = []
        for i in range(8):
            pairs = [
                SearchAttributePair(FLAG, i % 3 == 0),
                SearchAttributePair(WHEN, EPOCH + timedelta(seconds=i)),
            ]
            if i % 4 != 3:
                pairs.append(SearchAttributePair(vw.CUSTOMER, f"c-{i % 3}"))
            if i % 2 == 0:
                pairs.append(SearchAttributePair(SCORE, i / 2))
            handle = await client.start_workflow(
                vw.TaggedWorkflow.run,
                args=[i * 10, i >= 4],
                id=f"{prefix}-{i}",
                task_queue=task_queue,
                search_attributes=TypedSearchAttributes(pairs),
            )
            handles.append(handle)
            ids.append(handle.id)
        for handle in handles[:4]:
            await handle.result()
        for handle in handles[4:]:
            for _ in range(200):
                if vw.AMOUNT in (await handle.describe()).typed_search_attributes:
                    break
                await asyncio.sleep(0.05)
        await handles[6].terminate()
        await handles[7].terminate()
    return ids


async def _settled(client: Client, scope: str) -> None:
    """Wait until the server's visibility shows the final state of all eight runs."""
    for _ in range(200):
        count = await client.count_workflows(f"{scope} AND PerduraTags = 'upserted' GROUP BY ExecutionStatus")
        groups = {g.group_values[0]: g.count for g in count.groups}
        if groups == {"Completed": 4, "Running": 2, "Terminated": 2}:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"visibility did not settle: {groups}")


async def _answers(client: Client, scope: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for query in QUERIES:
        text = f"{scope} AND ({query})" if query else scope
        ids = sorted([w.id async for w in client.list_workflows(text, page_size=3)])
        count = (await client.count_workflows(text)).count
        out[query] = (ids, count)
    grouped = await client.count_workflows(f"{scope} GROUP BY ExecutionStatus")
    out["GROUP BY ExecutionStatus"] = sorted((g.group_values[0], g.count) for g in grouped.groups)
    for query in BAD_QUERIES:
        try:
            await client.count_workflows(query)
            out[query] = "accepted"
        except RPCError as e:
            out[query] = RPCStatusCode(e.status).name
    return out


@pytest.fixture(scope="module")
def opensearch_perdura(tmp_path_factory):
    """`perdura dev` with the OpenSearch visibility backend (osmem-server, or PERDURA_TEST_OPENSEARCH_URL)."""
    from tests.support import opensearch as support
    from tests.support import servers

    with support.opensearch_url() as url:
        index = support.index_name()
        env = {
            "PERDURA_VISIBILITY": "opensearch",
            "PERDURA_OPENSEARCH_URL": url,
            "PERDURA_OPENSEARCH_INDEX": index,
            "PERDURA_OPENSEARCH_REPLICAS": "0",
        }
        with servers.dev_server(tmp_path_factory.mktemp("dev-opensearch-diff"), env=env) as running:
            yield running
        support.drop_index(url, index)


@pytest.fixture(params=["sql", "opensearch"])
async def clients(request, both_clients) -> dict[str, Client]:
    """The real server and Perdura with one visibility backend or the other."""
    if request.param == "sql":
        return both_clients
    server = request.getfixturevalue("opensearch_perdura")
    return {
        "temporal": both_clients["temporal"],
        "perdura": await Client.connect(server.address, namespace="default"),
    }


async def test_same_answers_as_temporal(clients):
    """Every shared query lists and counts the same runs on both servers; bad ones are refused on both."""
    both_clients = clients
    prefix = f"vis-diff-{uuid.uuid4().hex[:8]}"
    task_queue = f"tq-{prefix}"
    scope = f"TaskQueue = '{task_queue}'"
    await asyncio.gather(*(_setup(c, task_queue, prefix) for c in both_clients.values()))
    await asyncio.gather(*(_settled(c, scope) for c in both_clients.values()))
    temporal, perdura = await asyncio.gather(
        _answers(both_clients["temporal"], scope), _answers(both_clients["perdura"], scope)
    )
    differences = {q: (temporal[q], perdura[q]) for q in temporal if temporal[q] != perdura[q]}
    assert not differences, differences
    # The real `temporal` CLI gives the same answers from both servers too.
    temporal, perdura = await asyncio.gather(
        asyncio.to_thread(_cli_answers, both_clients["temporal"], scope),
        asyncio.to_thread(_cli_answers, both_clients["perdura"], scope),
    )
    assert perdura == temporal


CLI_QUERIES = [
    "ExecutionStatus = 'Running'",
    "PerduraCustomer IN ('c-0', 'c-2')",
    "PerduraAmount BETWEEN 10 AND 40",
    "NOT (ExecutionStatus = 'Running' AND PerduraAmount > 10)",
]


def _cli_answers(client: Client, scope: str) -> dict[str, object]:
    """`temporal workflow list/count --query` and `temporal operator search-attribute list` answers."""
    import json
    import subprocess

    from tests.support.reference import TEMPORAL

    def cli(*args: str) -> object:
        done = subprocess.run(
            [str(TEMPORAL), *args, "--address", client.service_client.config.target_host, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return json.loads(done.stdout)

    out: dict[str, object] = {}
    for query in CLI_QUERIES:
        text = f"{scope} AND ({query})"
        listed = cli("workflow", "list", "--query", text)
        out[query] = (
            sorted(w["execution"]["workflowId"] for w in listed),
            cli("workflow", "count", "--query", text)["count"],
        )
    listed_attributes = cli("operator", "search-attribute", "list")
    out["custom attributes"] = sorted(
        (name, kind) for name, kind in listed_attributes["customAttributes"].items() if name in CUSTOM
    )
    return out
