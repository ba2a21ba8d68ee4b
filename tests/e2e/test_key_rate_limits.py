"""Per-key rate limits (issue 16): a looping API key is refused with RESOURCE_EXHAUSTED naming its own
limit, while another key of the same namespace is still served, against `perdura dev` (buckets in
memory) and the production processes (buckets in Redis).

Each test makes an organisation of its own with the operator CLI and gives the keys tiny rates: one with
`perdura apikey update KEY --actions-rps 1`, the other through the default share
(PERDURA_KEY_RATE_SHARE, 0.5) of a namespace limited by `perdura namespace update`.
"""

from __future__ import annotations

import json
import time
import uuid

import grpc
import pytest
from temporalio.api.enums.v1 import ResourceExhaustedCause, ResourceExhaustedScope
from temporalio.api.workflowservice.v1 import service_pb2_grpc as wss
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e.conftest import new_id
from tests.e2e.test_rate_limits import resource_exhausted_failure, start_request
from tests.e2e.workflows import HelloWorkflow, greet


def organization(server, **namespace_rps: str) -> tuple[str, str]:
    """An organisation with one namespace (its rates set by `namespace_rps`, e.g. actions="2")."""
    org = f"kl{uuid.uuid4().hex[:8]}"
    server.cli("org", "create", org, "--owner", f"owner@{org}.example")
    server.cli("namespace", "create", "a", "--org", org)
    if namespace_rps:
        flags = [item for bucket, value in namespace_rps.items() for item in (f"--{bucket}-rps", value)]
        server.cli("namespace", "update", f"a.{org}", *flags)
    return org, f"a.{org}"


def make_key(server, org: str, name: str, *flags: str) -> tuple[str, str]:
    """A new operator key on namespace `a` of `org`: (the key, its display prefix `pdk_<prefix>`)."""
    out = server.cli(
        "apikey", "create", "--org", org, "--namespace", "a", "--role", "operator", "--name", name, *flags
    )
    key = next(word for word in out.split() if word.startswith("pdk_") and len(word) > 20)
    return key, key[: len("pdk_") + 12]


async def starts_until_refused(client: Client, limit: int = 20) -> tuple[RPCError, int]:
    """Start workflows through `client`'s WorkflowService without the SDK's retries until one is refused;
    that refusal, and how many were admitted before it."""
    for admitted in range(limit):
        try:
            await client.workflow_service.start_workflow_execution(
                start_request(client.namespace), retry=False
            )
        except RPCError as e:
            return e, admitted
    raise AssertionError(f"{limit} starts at once were all admitted")


def audit_entries_of(server, org: str, prefix: str) -> list[dict]:
    """The organisation's audit entries whose actor is the key `prefix` (pdk_<prefix>)."""
    out = server.cli("audit", "export", "--org", org)
    entries = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [e for e in entries if e["actor"]["kind"] == "key" and e["actor"]["id"] == prefix]


async def test_a_looping_key_is_refused_by_its_own_limit_while_another_key_is_served(server):
    org, namespace = organization(server)
    looping, looping_prefix = make_key(server, org, "looping")
    other, _ = make_key(server, org, "other")
    out = server.cli("apikey", "update", looping_prefix, "--actions-rps", "1")
    assert "actions 1/s" in out, out
    assert "polls 0.5 of the namespace's" in out, out
    assert "rate_limits=actions=1" in server.cli("apikey", "list", "--org", org)

    looping_client = await Client.connect(server.address, namespace=namespace, api_key=looping, tls=False)
    refused, admitted = await starts_until_refused(looping_client)
    assert refused.status == RPCStatusCode.RESOURCE_EXHAUSTED, refused.message
    assert refused.message.startswith(
        f"API key rate limit exceeded: key {looping_prefix} allows 1 actions requests per second in "
        f"namespace {namespace!r}"
    ), refused.message
    assert looping.split("_", 2)[2] not in refused.message  # never the secret

    # The namespace's budget is intact: another key of it starts and runs workflows at once.
    other_client = await Client.connect(server.address, namespace=namespace, api_key=other, tls=False)
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(other_client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
        results = [
            await other_client.execute_workflow(HelloWorkflow.run, f"w{i}", id=new_id(), task_queue=queue)
            for i in range(5)
        ]
    assert results == [f"hello w{i}" for i in range(5)]

    # The refusal carries Temporal's details (the SDK's retry rules read the code); with its retries on,
    # the SDK gets the looping key's starts through, paced by the key's limit.
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        errors = []
        for _ in range(4):
            try:
                await stub.StartWorkflowExecution(
                    start_request(namespace), metadata=(("authorization", f"Bearer {looping}"),)
                )
            except grpc.aio.AioRpcError as e:
                errors.append(e)
        assert errors, "four starts at once passed a key limit of one a second with a burst of two"
        admitted += 4 - len(errors)
        assert errors[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        failure = resource_exhausted_failure(errors[0])
        assert failure.cause == ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT
        assert failure.scope == ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE
        # Named by its headers, the drained key's next call is refused before its bytes are read.
        # (On a busy machine the bucket may have refilled meanwhile: a call that gets through is refused
        # for its bytes, InvalidArgument, and takes a token, so the next ones find the key drained.)
        raw = channel.unary_unary("/temporal.api.workflowservice.v1.WorkflowService/StartWorkflowExecution")
        codes = []
        for _ in range(4):
            with pytest.raises(grpc.aio.AioRpcError) as shed:
                await raw(
                    b"\xff\xff\xff",
                    metadata=(("temporal-namespace", namespace), ("authorization", f"Bearer {looping}")),
                )
            codes.append(shed.value.code())
            if codes[-1] == grpc.StatusCode.RESOURCE_EXHAUSTED:
                break
        assert codes[-1] == grpc.StatusCode.RESOURCE_EXHAUSTED, codes
        assert set(codes[:-1]) <= {grpc.StatusCode.INVALID_ARGUMENT}, codes
        assert f"key {looping_prefix} allows 1 actions" in shed.value.details()

    patient = await Client.connect(server.address, namespace=namespace, api_key=looping, tls=False)
    for i in range(3):
        await patient.start_workflow(HelloWorkflow.run, str(i), id=new_id(), task_queue=f"tq-{uuid.uuid4()}")

    # Each admitted start left its audit entry; no refusal left one (a flood must not become inserts).
    entries = audit_entries_of(server, org, looping_prefix)
    assert [e["action"] for e in entries] == ["StartWorkflowExecution"] * (admitted + 3), entries
    assert all(e["outcome"] == "ok" for e in entries), entries

    # Back to the default share (250 a second of the namespace's 500): the running server applies it on
    # the key's next call (once the drained bucket's last refusal, at most a second old, has passed).
    assert "actions 0.5 of the namespace's" in server.cli(
        "apikey", "update", looping_prefix, "--actions-rps", "default"
    )
    time.sleep(1.1)
    for _ in range(10):
        await looping_client.workflow_service.start_workflow_execution(start_request(namespace), retry=False)


async def test_a_key_without_its_own_limit_gets_its_share_of_the_namespace_and_callers_without_keys_none(
    server,
):
    # A namespace of 2 starts a second (a burst of 4): each key gets 1 a second (a burst of 2).
    org, namespace = organization(server, actions="2")
    first, first_prefix = make_key(server, org, "first")
    second, _ = make_key(server, org, "second")
    _, big_prefix = make_key(server, org, "big", "--polls-rps", "50")
    listing = {line.split()[0]: line for line in server.cli("apikey", "list", "--org", org).splitlines()}
    assert listing[big_prefix].endswith("rate_limits=polls=50")
    assert listing[first_prefix].endswith("rate_limits=default")
    refused, _ = await starts_until_refused(
        await Client.connect(server.address, namespace=namespace, api_key=first, tls=False)
    )
    assert f"key {first_prefix} allows 1 actions requests per second" in refused.message, refused.message

    # The second key still has its own share, which the namespace's remaining tokens cover.
    second_client = await Client.connect(server.address, namespace=namespace, api_key=second, tls=False)
    await second_client.start_workflow(HelloWorkflow.run, "y", id=new_id(), task_queue=f"tq-{uuid.uuid4()}")

    # A loopback caller without a key (perdura dev's allowance) draws on the namespace alone, and is
    # refused by the namespace's limit, worded as Temporal's, never by a key's.
    _, fresh = organization(server, actions="2")
    anonymous = await Client.connect(server.address, namespace=fresh)
    refused, _ = await starts_until_refused(anonymous)
    assert refused.message.startswith(f"namespace rate limit exceeded: namespace {fresh!r} allows 2 actions")
