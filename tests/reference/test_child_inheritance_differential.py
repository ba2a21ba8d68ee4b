"""Differential test of a child workflow inheriting its pinned parent's version: one story told to the real
Temporal dev server and to `perdura dev`, the same routing and start events.

The story: workers of versions 1.0 and 2.0 of one deployment poll one task queue, and 1.0 is current. A
pinned parent runs its first task on 1.0; 2.0 is made current; the parent is signalled to run a child (an
auto-upgrade workflow) on the same task queue. What the real server does (Server 1.32.0), asserted below:
the child starts pinned to 1.0 (`inherited_pinned_version` on its start event) and runs there, though
2.0 is current.
"""

from __future__ import annotations

import asyncio
import pprint
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkerDeploymentVersion

from tests.e2e import deployment_workflows as dw
from tests.e2e.conftest import new_id
from tests.e2e.test_worker_deployments import set_current, visible
from tests.reference.test_deployment_routing_differential import _completions, _routed_to, _worker

pytestmark = pytest.mark.reference


async def _started(handle: WorkflowHandle, name: str) -> dict:
    async for event in handle.fetch_history_events():
        attrs = event.workflow_execution_started_event_attributes
        found = {
            "inheritedPinnedVersion": MessageToDict(attrs.inherited_pinned_version),
            "versioningOverride": MessageToDict(attrs.versioning_override),
        }
        return {k: str(v).replace(name, "<deployment>") for k, v in found.items()}
    raise AssertionError("no start event")


async def _story(client: Client) -> dict[str, Any]:
    name = new_id("inherit")
    queue = new_id("tq")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    async with (
        _worker(client, queue, v1, dw.InheritParentV1, dw.InheritChildV1),
        _worker(client, queue, v2, dw.InheritParentV2, dw.InheritChildV2),
    ):
        await visible(client, v2)
        token = (await set_current(client, v1, (await visible(client, v1)).conflict_token)).conflict_token
        await _routed_to(client, name, "1.0")
        parent = await client.start_workflow("InheritParent", id=new_id(), task_queue=queue)
        first = await parent.query("build")
        await set_current(client, v2, token)
        await _routed_to(client, name, "2.0")
        await parent.signal("spawn")
        result = await parent.result()
        child = client.get_workflow_handle(f"{parent.id}-child")
        return {
            "first": first,
            "result": result,
            "child started": await _started(child, name),
            "child completions": await _completions(child),
        }


async def test_a_child_of_a_pinned_parent_starts_on_its_version_as_on_the_real_server(both_clients):
    temporal, perdura = await asyncio.gather(
        _story(both_clients["temporal"]), _story(both_clients["perdura"])
    )
    assert temporal["result"] == ["v1", "v1"]
    assert "'buildId': '1.0'" in temporal["child started"]["inheritedPinnedVersion"]
    differences = {k: (temporal[k], perdura[k]) for k in temporal if temporal[k] != perdura[k]}
    assert not differences, pprint.pformat(differences, width=110)
