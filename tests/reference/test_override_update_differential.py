"""Differential test of a versioning override set and cleared by UpdateWorkflowExecutionOptions: one story
told to the real Temporal dev server and to `perdura dev`, the same answers, routing and events.

The story: workers of versions 1.0 and 2.0 of one deployment poll one task queue, and 1.0 is current. An
auto-upgrade run and a pinned run run their first task on 1.0. Then, by UpdateWorkflowExecutionOptions:
the auto-upgrade run is refused a pinned override without a version (it is pinned to nothing), and one
to a build its task queue never saw; it is pinned to 2.0, so its next task runs there. The pinned run is
given a pinned override without a version (the server fills in its own version), then the override is
cleared. A partial mask is sent too. What the real server does (Server 1.32.0) is asserted below, so this
file states it. One-time overrides are left out: the real server accepts them and Perdura refuses them
(README, Known limits).
"""

from __future__ import annotations

import asyncio
import pprint
from typing import Any

import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.json_format import MessageToDict
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e import deployment_workflows as dw
from tests.e2e.conftest import new_id
from tests.e2e.test_worker_deployments import set_current, visible
from tests.reference.test_deployment_routing_differential import _routed_to, _worker

pytestmark = pytest.mark.reference

PINNED = VersioningOverride.PINNED_OVERRIDE_BEHAVIOR_PINNED


def _pinned(name: str = "", build_id: str = "") -> WorkflowExecutionOptions:
    override = VersioningOverride(pinned=VersioningOverride.PinnedOverride(behavior=PINNED))
    if build_id:
        override.pinned.version.CopyFrom(VersionProto(deployment_name=name, build_id=build_id))
    return WorkflowExecutionOptions(versioning_override=override)


async def _story(client: Client) -> dict[str, Any]:
    name = new_id("override")
    queue = new_id("tq")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")

    def plain(text: str) -> str:
        # The names differ between the two stories; the answers should not.
        return text.replace("\xa0", " ").replace(queue, "<queue>").replace(name, "<deployment>")

    async def call(handle: WorkflowHandle, options: WorkflowExecutionOptions, *paths: str) -> Any:
        request = rr.UpdateWorkflowExecutionOptionsRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=handle.id),
            workflow_execution_options=options,
            update_mask=FieldMask(paths=list(paths)),
            identity="ops",
        )
        try:
            answer = await client.workflow_service.update_workflow_execution_options(request, retry=False)
        except RPCError as e:
            return RPCStatusCode(e.status).name, plain(e.message).replace(handle.id, "<workflow id>")
        return "OK", plain(str(MessageToDict(answer.workflow_execution_options)))

    async def override_of(handle: WorkflowHandle) -> str:
        described = await handle.describe()
        info = described.raw_description.workflow_execution_info.versioning_info
        return plain(str(MessageToDict(info.versioning_override)))

    async def option_events(handle: WorkflowHandle) -> list[str]:
        return [
            plain(str(MessageToDict(e.workflow_execution_options_updated_event_attributes)))
            async for e in handle.fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED
        ]

    async with (
        _worker(client, queue, v1, dw.PinnedV1, dw.AutoV1),
        _worker(client, queue, v2, dw.PinnedV2, dw.AutoV2),
    ):
        await visible(client, v2)
        await set_current(client, v1, (await visible(client, v1)).conflict_token)
        await _routed_to(client, name, "1.0")
        auto = await client.start_workflow("RoutedAuto", id=new_id(), task_queue=queue)
        pinned = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
        first = [await auto.query("build"), await pinned.query("build")]
        out: dict[str, Any] = {
            "first": first,
            "auto, pinned without a version": await call(auto, _pinned(), "versioning_override"),
            "auto, an unknown build": await call(auto, _pinned(name, "9.9"), "versioning_override"),
            "auto, a partial mask": await call(auto, _pinned(name, "2.0"), "versioning_override.pinned"),
            "auto, pinned to 2.0": await call(auto, _pinned(name, "2.0"), "versioning_override"),
            "auto, the same again": await call(auto, _pinned(name, "2.0"), "versioning_override"),
            "pinned, pinned without a version": await call(pinned, _pinned(), "versioning_override"),
        }
        out["auto, described"] = await override_of(auto)
        out["pinned, described"] = await override_of(pinned)
        out["pinned, cleared"] = await call(pinned, WorkflowExecutionOptions(), "versioning_override")
        out["pinned, described after"] = await override_of(pinned)
        await auto.signal("finish")
        await pinned.signal("finish")
        out["results"] = [await auto.result(), await pinned.result()]
        out["auto events"] = await option_events(auto)
        out["pinned events"] = await option_events(pinned)
    return out


async def test_an_override_set_by_update_routes_the_run_as_on_the_real_server(both_clients):
    temporal, perdura = await asyncio.gather(
        _story(both_clients["temporal"]), _story(both_clients["perdura"])
    )
    assert temporal["first"] == ["v1", "v1"]
    assert temporal["auto, pinned without a version"][0] == "FAILED_PRECONDITION"
    assert temporal["auto, an unknown build"][0] == "FAILED_PRECONDITION"
    assert temporal["auto, pinned to 2.0"][0] == "OK"
    assert temporal["results"] == ["v2", "v1"]
    differences = {k: (temporal[k], perdura[k]) for k in temporal if temporal[k] != perdura[k]}
    assert not differences, pprint.pformat(differences, width=110)
