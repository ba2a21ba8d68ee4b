"""API keys on the gRPC API: two tenants, each key confined to its namespaces and role (issue 5).

Keys are created with the operator CLI (`perdura org|namespace|apikey ...`) against the server's
database while it runs, then used through the official SDK (`api_key=`), raw gRPC and the `temporal` CLI.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sqlite3
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import psycopg
import pytest
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.operatorservice.v1 import service_pb2 as operator_service
from temporalio.api.operatorservice.v1 import service_pb2_grpc as oss
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.api.workflowservice.v1 import service_pb2 as workflow_service
from temporalio.api.workflowservice.v1 import service_pb2_grpc as wss
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e.conftest import new_id
from tests.e2e.workflows import HelloWorkflow, SignalWorkflow, greet
from tests.support import servers

TEMPORAL = str(Path(servers.PERDURA).parent / "temporal")
NAMESPACE_FREE = {"GetSystemInfo", "GetClusterInfo", "GetSearchAttributes", "ListNamespaces"}
"""WorkflowService methods whose requests name no namespace (cluster scope): nothing to deny."""


@dataclass
class Tenants:
    """Two organisations with a namespace each, and keys (plaintext) by name."""

    ns_a: str
    ns_b: str
    keys: dict[str, str] = field(default_factory=dict)


_tenants: dict[str, Tenants] = {}
_all_keys: list[str] = []


def create_key(server, org: str, namespace: str, role: str, name: str, expires: str = "1d") -> str:
    out = server.cli(
        "apikey",
        "create",
        "--org",
        org,
        "--namespace",
        namespace,
        "--role",
        role,
        "--name",
        name,
        "--expires",
        expires,
    )
    key = out.strip().splitlines()[-1]
    assert key.startswith("pdk_")
    _all_keys.append(key)
    return key


@pytest.fixture
def tenants(server) -> Tenants:
    """Organisations a… and b… with namespaces ns.a… and ns.b…, created once per server."""
    if server.address not in _tenants:
        suffix = uuid.uuid4().hex[:6]
        org_a, org_b = f"a{suffix}", f"b{suffix}"
        server.cli("org", "create", org_a, "--owner", f"owner@{org_a}.example")
        server.cli("org", "create", org_b, "--owner", f"owner@{org_b}.example")
        server.cli("namespace", "create", "ns", "--org", org_a, "--retention", "3d")
        server.cli("namespace", "create", "ns", "--org", org_b)
        t = Tenants(ns_a=f"ns.{org_a}", ns_b=f"ns.{org_b}")
        t.keys["a"] = create_key(server, org_a, t.ns_a, "admin", "admin a")
        t.keys["b"] = create_key(server, org_b, t.ns_b, "operator", "worker b")
        t.keys["a-reader"] = create_key(server, org_a, t.ns_a, "reader", "reader a")
        t.keys["a-operator"] = create_key(server, org_a, t.ns_a, "operator", "operator a")
        _tenants[server.address] = t
    return _tenants[server.address]


def org_of(namespace: str) -> str:
    return namespace.rpartition(".")[2]


async def connect(server, namespace: str, key: str) -> Client:
    # Perdura's gRPC listener is plaintext for now: the SDK turns TLS on with an API key unless told.
    return await Client.connect(server.address, namespace=namespace, api_key=key, tls=False)


def metadata(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


async def test_a_workflow_runs_with_each_tenants_key(server, tenants):
    for namespace, key in [(tenants.ns_a, tenants.keys["a-operator"]), (tenants.ns_b, tenants.keys["b"])]:
        client = await connect(server, namespace, key)
        queue = f"tq-{uuid.uuid4()}"
        async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
            result = await client.execute_workflow(HelloWorkflow.run, "key", id=new_id(), task_queue=queue)
        assert result == "hello key"


async def test_key_a_is_denied_every_method_on_namespace_b(server, tenants):
    """Every WorkflowService and OperatorService method naming namespace B answers PERMISSION_DENIED
    to tenant A's admin key, before any handler runs (so even unimplemented methods)."""
    key = tenants.keys["a"]
    secret = key
    async with grpc.aio.insecure_channel(server.address) as channel:
        stubs = [
            (
                workflow_service.DESCRIPTOR.services_by_name["WorkflowService"],
                wss.WorkflowServiceStub(channel),
                rr,
            ),
            (
                operator_service.DESCRIPTOR.services_by_name["OperatorService"],
                oss.OperatorServiceStub(channel),
                orr,
            ),
        ]
        checked = []
        for service, stub, module in stubs:
            for method in service.methods:
                request_class = getattr(module, method.input_type.name)
                if "namespace" not in method.input_type.fields_by_name:
                    continue
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await getattr(stub, method.name)(
                        request_class(namespace=tenants.ns_b), metadata=metadata(key), timeout=10
                    )
                assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, (
                    method.name,
                    caught.value.details(),
                )
                assert secret not in (caught.value.details() or "")
                checked.append(method.name)
        assert len(checked) > 120
        # The namespace-free calls work, and ListNamespaces shows A only its own.
        listed = await wss.WorkflowServiceStub(channel).ListNamespaces(
            rr.ListNamespacesRequest(), metadata=metadata(key)
        )
        assert [n.namespace_info.name for n in listed.namespaces] == [tenants.ns_a]
        await wss.WorkflowServiceStub(channel).GetSystemInfo(
            rr.GetSystemInfoRequest(), metadata=metadata(key)
        )
    assert {
        m.name
        for m in workflow_service.DESCRIPTOR.services_by_name["WorkflowService"].methods
        if "namespace" not in m.input_type.fields_by_name
    } == NAMESPACE_FREE


async def test_the_sdk_sees_permission_denied_on_the_other_tenants_namespace(server, tenants):
    client = await connect(server, tenants.ns_b, tenants.keys["a"])
    with pytest.raises(RPCError) as caught:
        await client.start_workflow(HelloWorkflow.run, "x", id=new_id(), task_queue="nowhere")
    assert caught.value.status == RPCStatusCode.PERMISSION_DENIED
    assert f"no access to namespace '{tenants.ns_b}'" in caught.value.message


async def test_a_reader_key_cannot_signal_or_terminate(server, tenants):
    operator = await connect(server, tenants.ns_a, tenants.keys["a-operator"])
    handle = await operator.start_workflow(
        SignalWorkflow.run, 5, id=new_id(), task_queue=f"tq-{uuid.uuid4()}"
    )
    reader = await connect(server, tenants.ns_a, tenants.keys["a-reader"])
    reader_handle = reader.get_workflow_handle(handle.id)
    assert (await reader_handle.describe()).id == handle.id
    for call in (
        lambda: reader_handle.signal(SignalWorkflow.add, "x"),
        lambda: reader_handle.terminate("no"),
    ):
        with pytest.raises(RPCError) as caught:
            await call()
        assert caught.value.status == RPCStatusCode.PERMISSION_DENIED
        assert "is a reader key" in caught.value.message
    await handle.terminate("done")


async def test_a_revoked_key_is_refused_on_the_next_call(server, tenants):
    key = create_key(server, org_of(tenants.ns_a), tenants.ns_a, "reader", "short-lived")
    client = await connect(server, tenants.ns_a, key)
    await client.workflow_service.describe_namespace(rr.DescribeNamespaceRequest(namespace=tenants.ns_a))
    server.cli("apikey", "revoke", key[:16])  # pdk_<prefix>
    with pytest.raises(RPCError) as caught:
        await client.workflow_service.describe_namespace(
            rr.DescribeNamespaceRequest(namespace=tenants.ns_a), retry=False
        )
    assert caught.value.status == RPCStatusCode.UNAUTHENTICATED
    assert "revoked" in caught.value.message
    assert key not in caught.value.message


async def test_an_expired_key_is_refused(server, tenants):
    key = create_key(server, org_of(tenants.ns_a), tenants.ns_a, "reader", "expiring", expires="3s")
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        request = rr.DescribeNamespaceRequest(namespace=tenants.ns_a)
        await stub.DescribeNamespace(request, metadata=metadata(key))
        await asyncio.sleep(3.5)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.DescribeNamespace(request, metadata=metadata(key))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "expired" in caught.value.details()


async def test_unknown_and_malformed_keys_are_unauthenticated(server, tenants):
    real = tenants.keys["a"]
    forged = real[:-4] + ("AAAA" if not real.endswith("AAAA") else "BBBB")
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        for header in (f"Bearer {forged}", "Bearer pdk_not-a-key", f"Bearer pdk_{'a' * 12}_{'b' * 43}"):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.DescribeNamespace(
                    rr.DescribeNamespaceRequest(namespace=tenants.ns_a), metadata=(("authorization", header),)
                )
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert forged not in caught.value.details()


async def test_loopback_allowance_ignores_a_header_that_is_not_a_perdura_key(server):
    """Some clients send another service's key everywhere (the SDK's plugin test does); Temporal's dev
    server ignores it, and so does the loopback allowance: the call is one without credentials. A
    server that requires keys refuses it (test_require_auth_refuses_calls_without_a_key_even_from_loopback)."""
    client = await Client.connect(
        server.address, namespace="default", api_key="sk-some-other-service", tls=False
    )
    description = await client.workflow_service.describe_namespace(
        rr.DescribeNamespaceRequest(namespace="default")
    )
    assert description.namespace_info.name == "default"


def temporal(server, key: str, *args: str) -> str:
    done = subprocess.run(
        [TEMPORAL, "--address", server.address, "--api-key", key, "--tls=false", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_temporal_cli_manages_namespaces_with_an_api_key(server, tenants):
    key = tenants.keys["a"]
    org = org_of(tenants.ns_a)
    name = f"cli{uuid.uuid4().hex[:6]}.{org}"
    temporal(
        server,
        key,
        "operator",
        "namespace",
        "create",
        "--namespace",
        name,
        "--retention",
        "5d",
        "--description",
        "made by the CLI",
    )
    described = json.loads(
        temporal(server, key, "operator", "namespace", "describe", "--namespace", name, "-o", "json")
    )
    assert described["namespaceInfo"]["name"] == name
    assert described["namespaceInfo"]["description"] == "made by the CLI"
    assert described["config"]["workflowExecutionRetentionTtl"] == f"{5 * 86400}s"
    temporal(server, key, "operator", "namespace", "update", "--namespace", name, "--retention", "10d")
    described = json.loads(
        temporal(server, key, "operator", "namespace", "describe", "--namespace", name, "-o", "json")
    )
    assert described["config"]["workflowExecutionRetentionTtl"] == f"{10 * 86400}s"
    listed = temporal(server, key, "operator", "namespace", "list", "-o", "json")
    names = {json.loads(line)["namespaceInfo"]["name"] for line in _json_objects(listed)}
    assert names == {tenants.ns_a, name}
    # Another tenant's suffix, an out-of-range retention and a reader key are refused with a reason.
    for args, key_used, reason in [
        (["create", "--namespace", f"x.{org_of(tenants.ns_b)}"], key, "may only register namespaces"),
        (["update", "--namespace", name, "--retention", "91d"], key, "between 1 and 90"),
        (
            ["update", "--namespace", tenants.ns_a, "--description", "x"],
            tenants.keys["a-reader"],
            "is a reader key",
        ),
    ]:
        done = subprocess.run(
            [
                TEMPORAL,
                "--address",
                server.address,
                "--api-key",
                key_used,
                "--tls=false",
                "operator",
                "namespace",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0
        assert reason in done.stderr


def _json_objects(text: str) -> list[str]:
    """The temporal CLI prints a JSON array or one object per line depending on version."""
    text = text.strip()
    if text.startswith("["):
        return [json.dumps(o) for o in json.loads(text)]
    decoder, objects, i = json.JSONDecoder(), [], 0
    while i < len(text):
        obj, end = decoder.raw_decode(text, i)
        objects.append(json.dumps(obj))
        i = end
        while i < len(text) and text[i].isspace():
            i += 1
    return objects


@pytest.fixture(scope="module")
def strict_dev_server(tmp_path_factory):
    with servers.dev_server(tmp_path_factory.mktemp("strict"), extra=("--require-auth",)) as running:
        yield running


async def test_require_auth_refuses_calls_without_a_key_even_from_loopback(strict_dev_server):
    with pytest.raises(RuntimeError, match="UNAUTHENTICATED|requires an API key"):
        await Client.connect(strict_dev_server.address, namespace="default")
    async with grpc.aio.insecure_channel(strict_dev_server.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await wss.WorkflowServiceStub(channel).ListNamespaces(rr.ListNamespacesRequest())
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "requires an API key" in caught.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await wss.WorkflowServiceStub(channel).ListNamespaces(
                rr.ListNamespacesRequest(), metadata=(("authorization", "Bearer sk-some-other-service"),)
            )
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # Load balancers still ask the health service without credentials.
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING
    # With a key the same server serves the SDK.
    org = f"s{uuid.uuid4().hex[:6]}"
    strict_dev_server.cli("org", "create", org, "--owner", "o@example.com")
    strict_dev_server.cli("namespace", "create", "main", "--org", org)
    key = create_key(strict_dev_server, org, f"main.{org}", "operator", "strict")
    client = await connect(strict_dev_server, f"main.{org}", key)
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
        assert (
            await client.execute_workflow(HelloWorkflow.run, "strict", id=new_id(), task_queue=queue)
            == "hello strict"
        )


def _stored_secrets(server) -> list[bytes]:
    """Every key hash and wrapped data key in the server's database."""
    queries = ["SELECT secret_hash FROM tenants_apikey", "SELECT wrapped_key FROM tenants_datakey"]
    if server.database_url:
        with psycopg.connect(server.database_url) as conn:
            rows = [r for q in queries for r in conn.execute(q).fetchall()]
    else:
        with sqlite3.connect(server.db_file) as conn:
            rows = [r for q in queries for r in conn.execute(q).fetchall()]
    return [v.encode() if isinstance(v, str) else bytes(v) for (v,) in rows]


async def test_no_secret_in_responses_errors_or_logs(server, tenants):
    """Keys, key hashes and data keys (wrapped or raw-looking) never reach a response, an error or a log line."""
    key = tenants.keys["a"]
    answers: list[bytes] = []
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = wss.WorkflowServiceStub(channel)
        answers.append(
            (
                await stub.ListNamespaces(rr.ListNamespacesRequest(), metadata=metadata(key))
            ).SerializeToString()
        )
        answers.append(
            (
                await stub.DescribeNamespace(
                    rr.DescribeNamespaceRequest(namespace=tenants.ns_a), metadata=metadata(key)
                )
            ).SerializeToString()
        )
        for header, namespace in [
            (f"Bearer {key[:-1]}x", tenants.ns_a),
            (f"Bearer {key}", tenants.ns_b),
            (f"Bearer {key} trailing", tenants.ns_a),
        ]:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.DescribeNamespace(
                    rr.DescribeNamespaceRequest(namespace=namespace), metadata=(("authorization", header),)
                )
            answers.append((caught.value.details() or "").encode())
            answers.append(repr(caught.value.trailing_metadata()).encode())
    time.sleep(0.5)  # let the server flush its log lines
    logs = b"".join(Path(p).read_bytes() for p in server.logs.values())
    secrets = _stored_secrets(server)
    assert secrets
    for plaintext in _all_keys:
        secrets.append(plaintext.encode())
        secrets.append(plaintext[17:].encode())  # the secret part
        secrets.append(hashlib.sha256(plaintext.encode()).hexdigest().encode())
    for secret in secrets:
        forms = {secret, base64.b64encode(secret), secret.hex().encode()}
        for form in forms:
            assert form not in logs
            for answer in answers:
                assert form not in answer
