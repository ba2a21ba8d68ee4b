"""Every audited action made through the Temporal API (the official SDK with API keys) and the operator
CLI, on both servers, leaves its own entry, read back with `perdura audit export`: action, actor (the
key's `pdk_<prefix>` and name, or the operator), namespace, target, source address, outcome and code.

Which methods are audited comes from the method table (engine/api/methods.py): every one of them is
refused to a reader key and each refusal is checked; the successful ones are performed below, and
tests/unit/test_audit_actions.py checks that CALLED (with the REST cases of
tests/integration/test_audit_actions.py) covers every audited method and recorded action of the code.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import re
import socket
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.batch.v1 import BatchOperationSignal
from temporalio.api.common.v1 import Payload, Priority, WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionMessage
from temporalio.api.enums.v1 import EventType, IndexedValueType
from temporalio.api.namespace.v1 import NamespaceConfig, UpdateNamespaceInfo
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.workflow.v1 import WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    WithStartWorkflowOperation,
)
from temporalio.common import WorkerDeploymentVersion, WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from engine.api import methods
from tests.e2e import test_auth as auth_tests
from tests.e2e.conftest import new_id
from tests.e2e.test_auth import _all_keys, connect, create_key, org_of
from tests.e2e.test_worker_deployments import set_current, set_ramping, versioned_worker, visible
from tests.e2e.workflows import (
    ALL_WORKFLOWS,
    ResettableWorkflow,
    SignalWorkflow,
    UpdatableWorkflow,
    WaitForCancelWorkflow,
)

tenants = auth_tests.tenants  # the fixture: two organisations and their keys, made once per server

AUDITED = {
    name
    for table in (methods.WORKFLOW_METHODS, methods.OPERATOR_METHODS)
    for name, rule in table.items()
    if rule.audit is not methods.Audit.NONE
}
"""Every gRPC method the audit log records (a CALL, or a CHANGE's refusal or failure)."""

CALLED = {
    # test_namespace_changes_through_the_temporal_api: entries of their services on success
    "RegisterNamespace": "namespace.register",
    "UpdateNamespace": "namespace.update",
    "DeprecateNamespace": "namespace.deprecate",
    "DeleteNamespace": "namespace.delete",
    "AddSearchAttributes": "AddSearchAttributes",
    "RemoveSearchAttributes": "RemoveSearchAttributes",
    # test_operator_actions_on_runs_through_the_sdk
    "StartWorkflowExecution": "StartWorkflowExecution",
    "SignalWorkflowExecution": "SignalWorkflowExecution",
    "SignalWithStartWorkflowExecution": "SignalWithStartWorkflowExecution",
    "RequestCancelWorkflowExecution": "RequestCancelWorkflowExecution",
    "TerminateWorkflowExecution": "TerminateWorkflowExecution",
    "ResetWorkflowExecution": "ResetWorkflowExecution",
    "UpdateWorkflowExecution": "UpdateWorkflowExecution",
    "DeleteWorkflowExecution": "DeleteWorkflowExecution",
    "ExecuteMultiOperation": "ExecuteMultiOperation",
    "CreateSchedule": "CreateSchedule",
    "UpdateSchedule": "UpdateSchedule",
    "PatchSchedule": "PatchSchedule",
    "DeleteSchedule": "DeleteSchedule",
    # test_activity_operator_calls_through_the_sdk
    "PauseActivity": "PauseActivity",
    "UnpauseActivity": "UnpauseActivity",
    "ResetActivity": "ResetActivity",
    "UpdateActivityOptions": "UpdateActivityOptions",
    "PauseActivityExecution": "PauseActivityExecution",
    "UnpauseActivityExecution": "UnpauseActivityExecution",
    "ResetActivityExecution": "ResetActivityExecution",
    "UpdateActivityExecutionOptions": "UpdateActivityExecutionOptions",
    # test_standalone_activity_calls_through_the_sdk
    "StartActivityExecution": "StartActivityExecution",
    "RequestCancelActivityExecution": "RequestCancelActivityExecution",
    "TerminateActivityExecution": "TerminateActivityExecution",
    "DeleteActivityExecution": "DeleteActivityExecution",
    # test_batch_operations_through_the_sdk
    "StartBatchOperation": "StartBatchOperation",
    "StopBatchOperation": "StopBatchOperation",
    # test_operator_actions_on_runs_through_the_sdk
    "UpdateWorkflowExecutionOptions": "UpdateWorkflowExecutionOptions",
    "PauseWorkflowExecution": "PauseWorkflowExecution",
    "UnpauseWorkflowExecution": "UnpauseWorkflowExecution",
    # test_worker_deployment_calls_through_the_sdk
    "CreateWorkerDeployment": "CreateWorkerDeployment",
    "CreateWorkerDeploymentVersion": "CreateWorkerDeploymentVersion",
    "SetWorkerDeploymentManager": "SetWorkerDeploymentManager",
    "SetWorkerDeploymentCurrentVersion": "SetWorkerDeploymentCurrentVersion",
    "SetWorkerDeploymentRampingVersion": "SetWorkerDeploymentRampingVersion",
    "UpdateWorkerDeploymentVersionMetadata": "UpdateWorkerDeploymentVersionMetadata",
    "DeleteWorkerDeploymentVersion": "DeleteWorkerDeploymentVersion",
    "DeleteWorkerDeployment": "DeleteWorkerDeployment",
}
"""Each audited gRPC method performed successfully here, and the action its entry carries."""

CLI_ACTIONS = {
    "organization.create",
    "member.add",
    "namespace.register",
    "namespace.rate_limits",
    "namespace.retry_jitter",
    "namespace.on_retries_exhausted",
    "apikey.create",
    "apikey.revoke",
    "apikey.rotate",
    "audit.prune",
}
"""The recorded actions test_operator_cli_commands_are_recorded_as_the_operator and
test_prune_deletes_old_entries_on_either_database check through the CLI."""

LOOPBACK = "127.0.0.1"


def export(server, *args: str) -> list[dict]:
    """`perdura audit export ...` as parsed JSON Lines."""
    return [json.loads(line) for line in server.cli("audit", "export", *args).splitlines()]


def prefix_of(key: str) -> str:
    return key[:16]  # pdk_<12-character prefix>


def key_actor(key: str, name: str) -> dict:
    return {"kind": "key", "id": prefix_of(key), "label": name}


def check(entry: dict, *, actor: dict, namespace: str | None, outcome: str = "ok", code: str = "OK") -> None:
    assert entry["actor"] == actor, entry
    assert entry["namespace"] == namespace, entry
    assert (entry["source"], entry["via"]) == (LOOPBACK, "grpc"), entry
    assert (entry["outcome"], entry["code"]) == (outcome, code), entry


def seconds(value: float) -> Duration:
    out = Duration()
    out.FromTimedelta(timedelta(seconds=value))
    return out


# --- control plane through the Temporal API ------------------------------------------------------------


async def test_namespace_changes_through_the_temporal_api(server, tenants):
    key = tenants.keys["a"]
    org = org_of(tenants.ns_a)
    client = await connect(server, tenants.ns_a, key)
    service, operator = client.workflow_service, client.operator_service
    name = f"cp{uuid.uuid4().hex[:6]}.{org}"
    register = rr.RegisterNamespaceRequest(
        namespace=name, workflow_execution_retention_period=seconds(2 * 86400)
    )
    await service.register_namespace(register)
    with pytest.raises(RPCError) as caught:
        await service.register_namespace(register)
    assert caught.value.status == RPCStatusCode.ALREADY_EXISTS
    await service.update_namespace(
        rr.UpdateNamespaceRequest(
            namespace=name,
            update_info=UpdateNamespaceInfo(description="orders"),
            config=NamespaceConfig(workflow_execution_retention_ttl=seconds(5 * 86400)),
        )
    )
    keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
    await operator.add_search_attributes(
        orr.AddSearchAttributesRequest(namespace=name, search_attributes={"AuditTier": keyword})
    )
    await operator.remove_search_attributes(
        orr.RemoveSearchAttributesRequest(namespace=name, search_attributes=["AuditTier"])
    )
    await service.deprecate_namespace(rr.DeprecateNamespaceRequest(namespace=name))
    deleted = await operator.delete_namespace(orr.DeleteNamespaceRequest(namespace=name))

    entries = [
        e for e in export(server, "--org", org, "--since", "10m") if e["target"] == f"namespace/{name}"
    ]
    assert [(e["action"], e["outcome"], e["code"], e["details"]) for e in entries] == [
        ("namespace.register", "ok", "OK", {"retention_days": 2}),
        ("RegisterNamespace", "failed", "ALREADY_EXISTS", {}),
        ("namespace.update", "ok", "OK", {"description": "orders", "retention_days": 5}),
        ("AddSearchAttributes", "ok", "OK", {"search_attributes": ["AuditTier"]}),
        ("RemoveSearchAttributes", "ok", "OK", {"search_attributes": ["AuditTier"]}),
        ("namespace.deprecate", "ok", "OK", {}),
        ("namespace.delete", "ok", "OK", {"deleted_name": deleted.deleted_namespace}),
    ]
    for entry in entries:
        check(
            entry,
            actor=key_actor(key, "admin a"),
            namespace=name,
            outcome=entry["outcome"],
            code=entry["code"],
        )
    assert {e["action"] for e in entries} >= {CALLED[m] for m in CALLED if m.endswith("Namespace")}


# --- operator actions on runs -----------------------------------------------------------------------


async def first_task_completed(handle) -> int:
    for _ in range(200):
        for event in [e async for e in handle.fetch_history_events()]:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                return event.event_id
        await asyncio.sleep(0.05)
    raise AssertionError("no workflow task completed")


async def test_operator_actions_on_runs_through_the_sdk(server, tenants):
    key, reader_key = tenants.keys["a-operator"], tenants.keys["a-reader"]
    ns = tenants.ns_a
    client = await connect(server, ns, key)
    queue = f"tq-{uuid.uuid4()}"
    ids = {what: new_id(f"audit-{what}") for what in ("update", "cancel", "sws", "uws", "refused")}
    schedule_id = new_id("audit-schedule")
    async with Worker(client, task_queue=queue, workflows=ALL_WORKFLOWS):
        # start, update, signal, delete
        updatable = await client.start_workflow(UpdatableWorkflow.run, id=ids["update"], task_queue=queue)
        assert await updatable.execute_update(UpdatableWorkflow.add, "one") == 1
        await updatable.signal(UpdatableWorkflow.finish)
        assert await updatable.result() == ["one"]
        await client.workflow_service.delete_workflow_execution(
            rr.DeleteWorkflowExecutionRequest(
                namespace=ns, workflow_execution=WorkflowExecution(workflow_id=ids["update"])
            )
        )
        # cancel
        waiting = await client.start_workflow(WaitForCancelWorkflow.run, id=ids["cancel"], task_queue=queue)
        await waiting.cancel()
        assert await waiting.result() == "saw cancellation"
        # signal-with-start, reset, terminate
        signalled = await client.start_workflow(
            SignalWorkflow.run,
            3,
            id=ids["sws"],
            task_queue=queue,
            start_signal="add",
            start_signal_args=["a"],
        )
        finished_task = await first_task_completed(signalled)
        reset = await client.workflow_service.reset_workflow_execution(
            rr.ResetWorkflowExecutionRequest(
                namespace=ns,
                workflow_execution=WorkflowExecution(workflow_id=ids["sws"], run_id=signalled.result_run_id),
                workflow_task_finish_event_id=finished_task,
                request_id=str(uuid.uuid4()),
                reason="audit",
            )
        )
        await client.get_workflow_handle(ids["sws"]).terminate("audit over")
        # update-with-start (ExecuteMultiOperation)
        start = WithStartWorkflowOperation(
            UpdatableWorkflow.run,
            id=ids["uws"],
            task_queue=queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )
        assert (
            await client.execute_update_with_start_workflow(
                UpdatableWorkflow.add, "first", start_workflow_operation=start
            )
            == 1
        )
        # the run controls: options (priority), pause and unpause
        execution = WorkflowExecution(workflow_id=ids["uws"])
        await client.workflow_service.update_workflow_execution_options(
            rr.UpdateWorkflowExecutionOptionsRequest(
                namespace=ns,
                workflow_execution=execution,
                workflow_execution_options=WorkflowExecutionOptions(priority=Priority(priority_key=2)),
                update_mask=FieldMask(paths=["priority"]),
            )
        )
        await client.workflow_service.pause_workflow_execution(
            rr.PauseWorkflowExecutionRequest(namespace=ns, workflow_id=ids["uws"])
        )
        await client.workflow_service.unpause_workflow_execution(
            rr.UnpauseWorkflowExecutionRequest(namespace=ns, workflow_id=ids["uws"])
        )
        await client.get_workflow_handle(ids["uws"]).terminate("audit over")
        # schedules
        schedule = await client.create_schedule(
            schedule_id,
            Schedule(
                action=ScheduleActionStartWorkflow(UpdatableWorkflow.run, id=new_id(), task_queue=queue),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=1))]),
                state=ScheduleState(paused=True),
            ),
        )
        await schedule.update(lambda given: ScheduleUpdate(schedule=given.description.schedule))
        await schedule.unpause(note="audit")
        await schedule.delete()
        # a reader key may not terminate: refused, and recorded as such
        refused = await client.start_workflow(WaitForCancelWorkflow.run, id=ids["refused"], task_queue=queue)
        reader = await connect(server, ns, reader_key)
        with pytest.raises(RPCError) as caught:
            await reader.get_workflow_handle(ids["refused"]).terminate("not mine to end")
        assert caught.value.status == RPCStatusCode.PERMISSION_DENIED
        await refused.cancel()

    entries = export(server, "--org", org_of(ns), "--namespace", ns, "--since", "10m")

    def of(workflow_id: str) -> list[tuple[str, str, str, str]]:
        mine = [e for e in entries if e["target"].split("/")[1:2] == [workflow_id]]
        return [(e["action"], e["target"], e["outcome"], e["code"]) for e in mine]

    assert of(ids["update"]) == [
        ("StartWorkflowExecution", f"workflow/{ids['update']}", "ok", "OK"),
        ("UpdateWorkflowExecution", f"workflow/{ids['update']}", "ok", "OK"),
        ("SignalWorkflowExecution", f"workflow/{ids['update']}", "ok", "OK"),
        ("DeleteWorkflowExecution", f"workflow/{ids['update']}", "ok", "OK"),
    ]
    assert of(ids["cancel"]) == [
        ("StartWorkflowExecution", f"workflow/{ids['cancel']}", "ok", "OK"),
        ("RequestCancelWorkflowExecution", f"workflow/{ids['cancel']}", "ok", "OK"),
    ]
    assert of(ids["sws"]) == [
        ("SignalWithStartWorkflowExecution", f"workflow/{ids['sws']}", "ok", "OK"),
        ("ResetWorkflowExecution", f"workflow/{ids['sws']}/{signalled.result_run_id}", "ok", "OK"),
        ("TerminateWorkflowExecution", f"workflow/{ids['sws']}", "ok", "OK"),
    ]
    assert reset.run_id
    assert of(ids["uws"]) == [
        ("ExecuteMultiOperation", f"workflow/{ids['uws']}", "ok", "OK"),
        ("UpdateWorkflowExecutionOptions", f"workflow/{ids['uws']}", "ok", "OK"),
        ("PauseWorkflowExecution", f"workflow/{ids['uws']}", "ok", "OK"),
        ("UnpauseWorkflowExecution", f"workflow/{ids['uws']}", "ok", "OK"),
        ("TerminateWorkflowExecution", f"workflow/{ids['uws']}", "ok", "OK"),
    ]
    assert of(schedule_id) == [
        (action, f"schedule/{schedule_id}", "ok", "OK")
        for action in ("CreateSchedule", "UpdateSchedule", "PatchSchedule", "DeleteSchedule")
    ]
    assert of(ids["refused"]) == [
        ("StartWorkflowExecution", f"workflow/{ids['refused']}", "ok", "OK"),
        ("TerminateWorkflowExecution", f"workflow/{ids['refused']}", "denied", "PERMISSION_DENIED"),
        ("RequestCancelWorkflowExecution", f"workflow/{ids['refused']}", "ok", "OK"),
    ]
    wanted = {*ids.values(), schedule_id}
    everything = [e for e in entries if e["target"].split("/")[1] in wanted]
    for entry in everything:
        refused_call = entry["outcome"] == "denied"
        actor = key_actor(reader_key, "reader a") if refused_call else key_actor(key, "operator a")
        check(entry, actor=actor, namespace=ns, outcome=entry["outcome"], code=entry["code"])
    details = {(e["action"], e["target"].split("/")[1]): e["details"] for e in everything}
    assert details["StartWorkflowExecution", ids["update"]] == {"workflow_type": "UpdatableWorkflow"}
    assert details["UpdateWorkflowExecution", ids["update"]] == {"update_name": "add"}
    assert details["SignalWorkflowExecution", ids["update"]] == {"signal_name": "finish"}
    assert details["SignalWithStartWorkflowExecution", ids["sws"]] == {
        "workflow_type": "SignalWorkflow",
        "signal_name": "add",
    }
    assert details["ResetWorkflowExecution", ids["sws"]] == {"workflow_task_finish_event_id": finished_task}
    # Never a payload (inputs, signal and update arguments, reasons) nor a key.
    shown = json.dumps(everything)
    for secret in ("audit over", "not mine to end", "first", *_all_keys):
        assert secret not in shown


async def test_batch_operations_through_the_sdk(server, tenants):
    """Starting and stopping a batch are recorded with the key, `batch/<job id>` and names only: the
    operation and signal name, how many runs were listed; never the reason or the signal's input."""
    key = tenants.keys["a-operator"]
    ns = tenants.ns_a
    client = await connect(server, ns, key)
    job_id = new_id("audit-batch")
    await client.workflow_service.start_batch_operation(
        rr.StartBatchOperationRequest(
            namespace=ns,
            job_id=job_id,
            reason="secret batch reason",
            executions=[WorkflowExecution(workflow_id=new_id("nobody")) for _ in range(2)],
            max_operations_per_second=0.1,
            signal_operation=BatchOperationSignal(signal="poke"),
        )
    )
    await client.workflow_service.stop_batch_operation(
        rr.StopBatchOperationRequest(namespace=ns, job_id=job_id, reason="secret stop reason")
    )
    entries = [
        e
        for e in export(server, "--org", org_of(ns), "--namespace", ns, "--since", "10m")
        if e["target"] == f"batch/{job_id}"
    ]
    assert [(e["action"], e["outcome"], e["code"]) for e in entries] == [
        ("StartBatchOperation", "ok", "OK"),
        ("StopBatchOperation", "ok", "OK"),
    ]
    for entry in entries:
        check(entry, actor=key_actor(key, "operator a"), namespace=ns)
    assert entries[0]["details"] == {"operation": "signal", "signal_name": "poke", "runs_listed": 2}
    assert "secret" not in json.dumps(entries)


async def pending_activity(handle) -> str:
    for _ in range(200):
        pending = (await handle.describe()).raw_description.pending_activities
        if pending:
            return pending[0].activity_id
        await asyncio.sleep(0.05)
    raise AssertionError("no pending activity")


async def test_activity_operator_calls_through_the_sdk(server, tenants):
    key = tenants.keys["a-operator"]
    ns = tenants.ns_a
    client = await connect(server, ns, key)
    queue = f"tq-{uuid.uuid4()}"
    workflow_id = new_id("audit-activity")
    # A workflow worker only: the run's activity stays scheduled, for the operator calls to act on.
    async with Worker(client, task_queue=queue, workflows=[ResettableWorkflow]):
        handle = await client.start_workflow(
            ResettableWorkflow.run, args=[1, 30.0, 0], id=workflow_id, task_queue=queue
        )
        activity_id = await pending_activity(handle)
        execution = WorkflowExecution(workflow_id=workflow_id)
        options = ActivityOptions(start_to_close_timeout=seconds(60))
        mask = FieldMask(paths=["start_to_close_timeout"])
        service = client.workflow_service
        await service.pause_activity(
            rr.PauseActivityRequest(namespace=ns, execution=execution, id=activity_id)
        )
        await service.unpause_activity(
            rr.UnpauseActivityRequest(namespace=ns, execution=execution, id=activity_id)
        )
        await service.reset_activity(
            rr.ResetActivityRequest(namespace=ns, execution=execution, id=activity_id)
        )
        await service.update_activity_options(
            rr.UpdateActivityOptionsRequest(
                namespace=ns, execution=execution, id=activity_id, activity_options=options, update_mask=mask
            )
        )
        by_id = {"namespace": ns, "workflow_id": workflow_id, "activity_id": activity_id}
        await service.pause_activity_execution(rr.PauseActivityExecutionRequest(**by_id))
        await service.unpause_activity_execution(rr.UnpauseActivityExecutionRequest(**by_id))
        await service.reset_activity_execution(rr.ResetActivityExecutionRequest(**by_id))
        await service.update_activity_execution_options(
            rr.UpdateActivityExecutionOptionsRequest(**by_id, activity_options=options, update_mask=mask)
        )
        await handle.terminate("audit over")

    entries = export(server, "--org", org_of(ns), "--namespace", ns, "--since", "10m")
    activity = f"workflow/{workflow_id}/activity/{activity_id}"
    mine = [e for e in entries if e["target"].startswith(f"workflow/{workflow_id}")]
    assert [(e["action"], e["target"]) for e in mine] == [
        ("StartWorkflowExecution", f"workflow/{workflow_id}"),
        ("PauseActivity", activity),
        ("UnpauseActivity", activity),
        ("ResetActivity", activity),
        ("UpdateActivityOptions", activity),
        ("PauseActivityExecution", activity),
        ("UnpauseActivityExecution", activity),
        ("ResetActivityExecution", activity),
        ("UpdateActivityExecutionOptions", activity),
        ("TerminateWorkflowExecution", f"workflow/{workflow_id}"),
    ]
    for entry in mine:
        check(entry, actor=key_actor(key, "operator a"), namespace=ns)


async def test_standalone_activity_calls_through_the_sdk(server, tenants):
    """Starting, cancelling, terminating and deleting standalone activities are recorded with the activity
    (and its run, when the call names one) as their target; a refused cancel is recorded as failed."""
    key = tenants.keys["a-operator"]
    ns = tenants.ns_a
    client = await connect(server, ns, key)
    queue = f"tq-{uuid.uuid4()}"
    first, second = new_id("audit-sa"), new_id("audit-sa")
    options = {"task_queue": queue, "start_to_close_timeout": timedelta(seconds=30)}
    one = await client.start_activity("audited", id=first, **options)
    two = await client.start_activity("audited", id=second, **options)
    await one.cancel(reason="audit")
    with pytest.raises(RPCError) as refused:
        await one.cancel(reason="audit again")
    assert refused.value.status == RPCStatusCode.FAILED_PRECONDITION
    await two.terminate(reason="audit")
    await client.workflow_service.delete_activity_execution(
        rr.DeleteActivityExecutionRequest(namespace=ns, activity_id=second, run_id=two.run_id or "")
    )

    entries = export(server, "--org", org_of(ns), "--namespace", ns, "--since", "10m")
    mine = [e for e in entries if e["target"].startswith(("activity/" + first, "activity/" + second))]
    assert [(e["action"], e["target"], e["outcome"]) for e in mine] == [
        ("StartActivityExecution", f"activity/{first}", "ok"),
        ("StartActivityExecution", f"activity/{second}", "ok"),
        ("RequestCancelActivityExecution", f"activity/{first}/{one.run_id}", "ok"),
        ("RequestCancelActivityExecution", f"activity/{first}/{one.run_id}", "failed"),
        ("TerminateActivityExecution", f"activity/{second}/{two.run_id}", "ok"),
        ("DeleteActivityExecution", f"activity/{second}/{two.run_id}", "ok"),
    ]
    for entry in mine:
        check(
            entry,
            actor=key_actor(key, "operator a"),
            namespace=ns,
            outcome=entry["outcome"],
            code="OK" if entry["outcome"] == "ok" else "FAILED_PRECONDITION",
        )


async def test_worker_deployment_calls_through_the_sdk(server, tenants):
    """Creating a worker deployment and a version, setting its manager, routing its versions, changing a version's metadata and
    deleting a version and its deployment are recorded with the deployment (and build id) as their target."""
    key = tenants.keys["a-operator"]
    ns = tenants.ns_a
    client = await connect(server, ns, key)
    name = f"audit-dep-{uuid.uuid4().hex[:8]}"
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = f"tq-{uuid.uuid4()}"
    await client.workflow_service.create_worker_deployment(
        rr.CreateWorkerDeploymentRequest(namespace=ns, deployment_name=name, request_id=str(uuid.uuid4())),
        retry=False,
    )
    await client.workflow_service.create_worker_deployment_version(
        rr.CreateWorkerDeploymentVersionRequest(
            namespace=ns,
            deployment_version=VersionMessage(deployment_name=name, build_id="3.0"),
            request_id=str(uuid.uuid4()),
        ),
        retry=False,
    )
    for manager in ("operator", ""):  # set, then unset (the deletes below name no identity)
        await client.workflow_service.set_worker_deployment_manager(
            rr.SetWorkerDeploymentManagerRequest(
                namespace=ns, deployment_name=name, manager_identity=manager, identity="operator"
            ),
            retry=False,
        )
    async with versioned_worker(client, queue, v1), versioned_worker(client, queue, v2):
        await visible(client, v1)
        token = (await visible(client, v2)).conflict_token
        token = (await set_current(client, v1, token)).conflict_token
        token = (await set_ramping(client, v2, 30, token)).conflict_token
        await set_ramping(client, WorkerDeploymentVersion(deployment_name=name, build_id=""), 0, token)
        update = rr.UpdateWorkerDeploymentVersionMetadataRequest(
            namespace=ns, deployment_version=VersionMessage(deployment_name=name, build_id="2.0")
        )
        update.upsert_entries["owner"].CopyFrom(Payload(data=b'"team-a"'))
        await client.workflow_service.update_worker_deployment_version_metadata(update, retry=False)
    # Temporal keeps a version polled in the last five minutes: make its last poll older than that.
    age_last_poll(server, name, "2.0", timedelta(minutes=10))
    await client.workflow_service.delete_worker_deployment_version(
        rr.DeleteWorkerDeploymentVersionRequest(
            namespace=ns,
            deployment_version=VersionMessage(deployment_name=name, build_id="2.0"),
            skip_drainage=True,
        ),
        retry=False,
    )
    with pytest.raises(RPCError) as refused:  # 1.0 is current
        await client.workflow_service.delete_worker_deployment(
            rr.DeleteWorkerDeploymentRequest(namespace=ns, deployment_name=name), retry=False
        )
    assert refused.value.status == RPCStatusCode.FAILED_PRECONDITION

    entries = export(server, "--org", org_of(ns), "--namespace", ns, "--since", "10m")
    mine = [e for e in entries if e["target"].startswith(f"deployment/{name}")]
    assert [(e["action"], e["target"], e["outcome"]) for e in mine] == [
        ("CreateWorkerDeployment", f"deployment/{name}", "ok"),
        ("CreateWorkerDeploymentVersion", f"deployment/{name}/3.0", "ok"),
        ("SetWorkerDeploymentManager", f"deployment/{name}", "ok"),
        ("SetWorkerDeploymentManager", f"deployment/{name}", "ok"),
        ("SetWorkerDeploymentCurrentVersion", f"deployment/{name}/1.0", "ok"),
        ("SetWorkerDeploymentRampingVersion", f"deployment/{name}/2.0", "ok"),
        ("SetWorkerDeploymentRampingVersion", f"deployment/{name}", "ok"),
        ("UpdateWorkerDeploymentVersionMetadata", f"deployment/{name}/2.0", "ok"),
        ("DeleteWorkerDeploymentVersion", f"deployment/{name}/2.0", "ok"),
        ("DeleteWorkerDeployment", f"deployment/{name}", "failed"),
    ]
    for entry in mine:
        check(
            entry,
            actor=key_actor(key, "operator a"),
            namespace=ns,
            outcome=entry["outcome"],
            code="OK" if entry["outcome"] == "ok" else "FAILED_PRECONDITION",
        )


def age_last_poll(server, deployment: str, build_id: str, age: timedelta) -> None:
    """Date a version's last poll `age` ago, straight in the server's database."""
    when = datetime.now(UTC) - age
    sql = (
        "UPDATE engine_workerdeploymentversion SET last_poll_at = {p} WHERE build_id = {p} AND deployment_id IN "
        "(SELECT id FROM engine_workerdeployment WHERE name = {p})"
    )
    if server.database_url:
        with psycopg.connect(server.database_url) as conn:
            assert conn.execute(sql.format(p="%s"), [when, build_id, deployment]).rowcount == 1
    else:
        with sqlite3.connect(server.db_file, timeout=30) as conn:
            stamp = when.strftime("%Y-%m-%d %H:%M:%S.%f")
            assert conn.execute(sql.format(p="?"), [stamp, build_id, deployment]).rowcount == 1


async def test_every_audited_method_refused_to_a_reader_key_is_recorded(server, tenants):
    """Each row of the method table with an audit mode, called with a reader key: PERMISSION_DENIED,
    and one `denied` entry naming the key, the namespace, the target and the caller's address."""
    org = org_of(tenants.ns_a)
    reader_key = create_key(server, org, tenants.ns_a, "reader", "audit reader")
    client = await connect(server, tenants.ns_a, reader_key)
    token = uuid.uuid4().hex[:8]
    expected = {}
    for name in sorted(AUDITED):
        service, module = (
            (client.operator_service, orr)
            if name in methods.OPERATOR_METHODS
            else (client.workflow_service, rr)
        )
        request = getattr(module, f"{name}Request")(namespace=tenants.ns_a)
        fields = request.DESCRIPTOR.fields_by_name
        target = f"workflow/{name}-{token}"
        if "workflow_id" in fields:
            request.workflow_id = f"{name}-{token}"
        elif "workflow_execution" in fields:
            request.workflow_execution.workflow_id = f"{name}-{token}"
        elif "execution" in fields:
            request.execution.workflow_id = f"{name}-{token}"
        elif "schedule_id" in fields:
            request.schedule_id = f"{name}-{token}"
            target = f"schedule/{name}-{token}"
        elif "activity_id" in fields:
            request.activity_id = f"{name}-{token}"
            target = f"activity/{name}-{token}"
        elif name == "ExecuteMultiOperation":
            request.operations.add().start_workflow.workflow_id = f"{name}-{token}"
        elif "job_id" in fields:
            request.job_id = f"{name}-{token}"
            target = f"batch/{name}-{token}"
        elif "deployment_version" in fields:
            request.deployment_version.deployment_name = f"{name}-{token}"
            request.deployment_version.build_id = "1.0"
            target = f"deployment/{name}-{token}/1.0"
        elif "deployment_name" in fields:
            request.deployment_name = f"{name}-{token}"
            target = f"deployment/{name}-{token}"
        elif name == "RegisterNamespace":
            request.namespace = f"{name.lower()}{token}.{org}"
            target = f"namespace/{request.namespace}"
        else:
            target = f"namespace/{tenants.ns_a}"
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
        with pytest.raises(RPCError) as caught:
            await getattr(service, snake)(request)
        assert caught.value.status == RPCStatusCode.PERMISSION_DENIED, name
        expected[name] = (target, request.namespace)

    entries = [
        e for e in export(server, "--org", org, "--since", "10m") if e["actor"]["id"] == prefix_of(reader_key)
    ]
    assert sorted(e["action"] for e in entries) == sorted(AUDITED)
    for entry in entries:
        target, namespace = expected[entry["action"]]
        assert entry["target"] == target, entry
        check(
            entry,
            actor=key_actor(reader_key, "audit reader"),
            namespace=namespace,
            outcome="denied",
            code="PERMISSION_DENIED",
        )


# --- the operator CLI ----------------------------------------------------------------------------------


def test_operator_cli_commands_are_recorded_as_the_operator(server):
    org = f"c{uuid.uuid4().hex[:6]}"
    ns = f"ops.{org}"
    server.cli("org", "create", org, "--owner", f"owner@{org}.example")
    server.cli("namespace", "create", "ops", "--org", org, "--retention", "5d")
    server.cli("namespace", "update", ns, "--actions-rps", "50")
    server.cli("namespace", "update", ns, "--retry-jitter", "0.5", "--on-retries-exhausted", "park")
    key = server.cli(
        "apikey", "create", "--org", org, "--namespace", ns, "--role", "reader", "--name", "cli key"
    ).splitlines()[-1]
    successor = server.cli("apikey", "rotate", prefix_of(key)).splitlines()[-1]
    server.cli("apikey", "revoke", prefix_of(successor))
    _all_keys.extend([key, successor])

    entries = export(server, "--org", org)
    old, new = f"apikey/{prefix_of(key)}", f"apikey/{prefix_of(successor)}"
    assert [(e["action"], e["target"], e["namespace"]) for e in entries] == [
        ("organization.create", f"organization/{org}", None),
        ("member.add", f"member/owner@{org}.example", None),
        ("namespace.register", f"namespace/{ns}", ns),
        ("namespace.rate_limits", f"namespace/{ns}", ns),
        ("namespace.retry_jitter", f"namespace/{ns}", ns),
        ("namespace.on_retries_exhausted", f"namespace/{ns}", ns),
        ("apikey.create", old, ns),
        ("apikey.create", new, ns),
        ("apikey.revoke", old, None),
        ("apikey.rotate", old, None),
        ("apikey.revoke", new, None),
    ]
    for entry in entries:
        assert entry["actor"] == {"kind": "operator", "id": "cli", "label": getpass.getuser()}, entry
        assert (entry["source"], entry["via"]) == (socket.gethostname(), "cli"), entry
        assert (entry["outcome"], entry["code"]) == ("ok", "OK")
    assert entries[2]["details"] == {"retention_days": 5}
    assert entries[3]["details"] == {"rate_limits": {"actions": 50.0}}
    assert entries[4]["details"] == {"retry_jitter": 0.5}
    assert entries[5]["details"] == {"on_retries_exhausted": "park"}
    assert entries[7]["details"]["rotated_from"] == prefix_of(key)
    shown = json.dumps(entries)
    assert key not in shown
    assert successor not in shown


def insert_old_entry(server, age: timedelta) -> str:
    """Write an entry dated `age` ago straight into the server's database; its action (unique)."""
    action = f"test.old{uuid.uuid4().hex[:8]}"
    time = datetime.now(UTC) - age
    columns = (
        "time, organization_id, namespace_id, namespace, actor_kind, actor_id, actor_label, action, "
        "target, source, via, outcome, code, details"
    )
    values = [time, None, None, "", "system", "", "", action, "", "", "internal", "ok", "OK", "{}"]
    if server.database_url:
        with psycopg.connect(server.database_url) as conn:
            conn.execute(
                f"INSERT INTO tenants_auditevent ({columns}) VALUES ({', '.join(['%s'] * 14)})", values
            )
    else:
        values[0] = time.strftime("%Y-%m-%d %H:%M:%S.%f")
        with sqlite3.connect(server.db_file, timeout=30) as conn:
            conn.execute(
                f"INSERT INTO tenants_auditevent ({columns}) VALUES ({', '.join(['?'] * 14)})", values
            )
    return action


def test_prune_deletes_old_entries_on_either_database(server):
    """`perdura audit prune` on SQLite (`perdura dev`: no trigger) and Postgres (the trigger lets only
    this path's deletes through): entries older than the retention go, the others stay, the prune is
    recorded as the operator's, and a retention under 30 days is refused."""
    old, recent = insert_old_entry(server, timedelta(days=500)), insert_old_entry(server, timedelta(days=300))
    before = {e["action"] for e in export(server)}
    assert {old, recent} <= before
    out = server.cli("audit", "prune")
    assert re.match(r"^\d+ audit entries older than \S+ deleted$", out.strip()), out
    after = export(server)
    actions = {e["action"] for e in after}
    assert old not in actions
    assert recent in actions
    pruned = [e for e in after if e["action"] == "audit.prune"][-1]
    assert pruned["actor"] == {"kind": "operator", "id": "cli", "label": getpass.getuser()}
    assert (pruned["via"], pruned["outcome"], pruned["details"]["retention_days"]) == ("cli", "ok", 400)
    assert pruned["details"]["deleted"] >= 1
    assert "nothing pruned" in server.cli("audit", "prune", "--retention-days", "0")
    with pytest.raises(RuntimeError, match="at least 30 days"):
        server.cli("audit", "prune", "--retention-days", "7")
