"""The audit log end to end: run operations made through the official SDK with API keys, refusals,
DeleteNamespace through the real `temporal` CLI, read back with `perdura audit export`; and TLS."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import subprocess
import uuid

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode, TLSConfig
from temporalio.worker import Worker

from tests.e2e import test_auth as auth_tests
from tests.e2e.conftest import new_id
from tests.e2e.test_auth import TEMPORAL, _all_keys, connect, org_of
from tests.e2e.workflows import HelloWorkflow, SignalWorkflow, greet
from tests.support import servers

tenants = auth_tests.tenants  # the fixture: two organisations and their keys, made once per server


def export(server, *args: str) -> list[dict]:
    """`perdura audit export ...` as parsed JSON Lines."""
    return [json.loads(line) for line in server.cli("audit", "export", *args).splitlines()]


def prefix_of(key: str) -> str:
    return key[:16]  # pdk_<12-character prefix>


async def test_run_operations_with_a_key_are_recorded_with_its_prefix_and_outcome(server, tenants):
    operator_key, reader_key = tenants.keys["a-operator"], tenants.keys["a-reader"]
    client = await connect(server, tenants.ns_a, operator_key)
    queue = f"tq-{uuid.uuid4()}"
    workflow_id = new_id("audited")
    async with Worker(client, task_queue=queue, workflows=[SignalWorkflow]):
        handle = await client.start_workflow(SignalWorkflow.run, 5, id=workflow_id, task_queue=queue)
        await handle.signal(SignalWorkflow.add, "card 4111 1111 1111 1111")
        for _ in range(100):
            history = [e async for e in handle.fetch_history_events()]
            if any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in history):
                break
            await asyncio.sleep(0.05)
        completed = next(e for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        reset = await client.workflow_service.reset_workflow_execution(
            rr.ResetWorkflowExecutionRequest(
                namespace=tenants.ns_a,
                workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=handle.result_run_id),
                workflow_task_finish_event_id=completed.event_id,
                request_id=str(uuid.uuid4()),
                reason="audit test",
            )
        )
        reader = await connect(server, tenants.ns_a, reader_key)
        with pytest.raises(RPCError) as caught:
            await reader.get_workflow_handle(workflow_id).signal(SignalWorkflow.add, "no")
        assert caught.value.status == RPCStatusCode.PERMISSION_DENIED
        await client.get_workflow_handle(workflow_id).terminate("audit test done")

    entries = export(server, "--org", org_of(tenants.ns_a), "--namespace", tenants.ns_a, "--since", "10m")
    mine = [e for e in entries if e["target"].startswith(f"workflow/{workflow_id}")]
    seen = [(e["action"], e["actor"]["id"], e["outcome"], e["code"]) for e in mine]
    operator, reader_id = prefix_of(operator_key), prefix_of(reader_key)
    assert seen == [
        ("StartWorkflowExecution", operator, "ok", "OK"),
        ("SignalWorkflowExecution", operator, "ok", "OK"),
        ("ResetWorkflowExecution", operator, "ok", "OK"),
        ("SignalWorkflowExecution", reader_id, "denied", "PERMISSION_DENIED"),
        ("TerminateWorkflowExecution", operator, "ok", "OK"),
    ]
    for entry in mine:
        assert entry["namespace"] == tenants.ns_a
        assert entry["via"] == "grpc"
        assert entry["source"] == "127.0.0.1"
        assert entry["actor"]["kind"] == "key"
    assert mine[0]["actor"]["label"] == "operator a"
    assert mine[0]["details"] == {"workflow_type": "SignalWorkflow"}
    assert mine[1]["details"] == {"signal_name": "add"}
    assert mine[2]["target"] == f"workflow/{workflow_id}/{handle.result_run_id}"
    assert reset.run_id
    # Worker calls (polls, completions, heartbeats) are not recorded; no key or payload ever is.
    everything = json.dumps(entries)
    assert not any(e["action"].startswith(("Poll", "Respond", "Record")) for e in entries)
    # The whole payload, not a fragment: "4111" alone also turns up in timestamps' microseconds.
    assert "4111 1111 1111 1111" not in everything
    for key in _all_keys:
        assert key not in everything


def temporal(server, key: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TEMPORAL, "--address", server.address, "--api-key", key, "--tls=false", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_temporal_cli_deletes_a_namespace_with_an_api_key(server, tenants):
    key, reader = tenants.keys["a"], tenants.keys["a-reader"]
    org = org_of(tenants.ns_a)
    name = f"gone{uuid.uuid4().hex[:6]}.{org}"
    done = temporal(server, key, "operator", "namespace", "create", "--namespace", name)
    assert done.returncode == 0, done.stderr
    # A reader key may not delete a namespace (and that refusal is recorded).
    denied = temporal(server, reader, "operator", "namespace", "delete", "--namespace", tenants.ns_a, "--yes")
    assert denied.returncode != 0
    assert "is a reader key" in denied.stderr
    done = temporal(server, key, "operator", "namespace", "delete", "--namespace", name, "--yes")
    assert done.returncode == 0, done.stderr
    assert f"Namespace {name} has been deleted" in done.stdout
    base = name.removesuffix(f".{org}")
    # The name is gone (and free again); the key no longer reaches the deleted namespace.
    described = temporal(server, key, "operator", "namespace", "describe", "--namespace", name)
    assert described.returncode != 0
    listed = temporal(server, key, "operator", "namespace", "list", "-o", "json")
    assert name not in listed.stdout

    entries = export(server, "--org", org, "--since", "10m")
    deleted = [e for e in entries if e["action"] == "namespace.delete" and e["target"] == f"namespace/{name}"]
    assert len(deleted) == 1
    assert deleted[0]["details"]["deleted_name"].startswith(f"{base}-deleted-")
    assert (deleted[0]["actor"]["id"], deleted[0]["via"], deleted[0]["outcome"]) == (
        prefix_of(key),
        "grpc",
        "ok",
    )
    refused = [
        e for e in entries if e["action"] == "DeleteNamespace" and e["actor"]["id"] == prefix_of(reader)
    ]
    assert [(e["outcome"], e["code"], e["namespace"]) for e in refused] == [
        ("denied", "PERMISSION_DENIED", tenants.ns_a)
    ]
    registered = [
        e for e in entries if e["action"] == "namespace.register" and e["target"] == f"namespace/{name}"
    ]
    assert registered
    assert registered[0]["actor"]["id"] == prefix_of(key)


async def test_delete_namespace_answers_the_deleted_name(server, tenants):
    key = tenants.keys["a"]
    org = org_of(tenants.ns_a)
    client = await connect(server, tenants.ns_a, key)
    name = f"old{uuid.uuid4().hex[:6]}.{org}"
    await client.workflow_service.register_namespace(rr.RegisterNamespaceRequest(namespace=name))
    answer = await client.operator_service.delete_namespace(orr.DeleteNamespaceRequest(namespace=name))
    assert answer.deleted_namespace.startswith(name.removesuffix(f".{org}") + "-deleted-")
    assert answer.deleted_namespace.endswith(f".{org}")
    with pytest.raises(RPCError) as caught:
        await client.operator_service.delete_namespace(orr.DeleteNamespaceRequest(namespace=name))
    assert caught.value.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.PERMISSION_DENIED)


def _certificates(tmp) -> tuple[bytes, str, str]:
    """A throwaway CA and a server certificate it signs for 127.0.0.1 and localhost, made now (no
    download; rustls, under the SDK, refuses a CA certificate used as the server's own): the CA's PEM
    and the server's certificate and key files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject, issuer, public_key, signing_key, extensions):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = certificate(
        "perdura test CA", "perdura test CA", ca_key.public_key(), ca_key,
        [(x509.BasicConstraints(ca=True, path_length=0), True)],
    )  # fmt: skip
    server = certificate(
        "localhost",
        "perdura test CA",
        server_key.public_key(),
        ca_key,
        [
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                False,
            ),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
        ],
    )
    cert_file, key_file = tmp / "server.pem", tmp / "server.key"
    cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca.public_bytes(serialization.Encoding.PEM), str(cert_file), str(key_file)


async def test_the_grpc_listener_serves_tls(tmp_path):
    pem, cert, key = _certificates(tmp_path)
    with servers.dev_server(tmp_path, extra=("--require-auth", "--tls-cert", cert, "--tls-key", key)) as dev:
        org = f"t{uuid.uuid4().hex[:6]}"
        dev.cli("org", "create", org, "--owner", "o@example.com")
        dev.cli("namespace", "create", "main", "--org", org)
        api_key = dev.cli(
            "apikey",
            "create",
            "--org",
            org,
            "--namespace",
            f"main.{org}",
            "--role",
            "operator",
            "--name",
            "tls",
        ).splitlines()[-1]
        client = await Client.connect(
            dev.address, namespace=f"main.{org}", api_key=api_key, tls=TLSConfig(server_root_ca_cert=pem)
        )
        queue = f"tq-{uuid.uuid4()}"
        async with Worker(client, task_queue=queue, workflows=[HelloWorkflow], activities=[greet]):
            assert await client.execute_workflow(HelloWorkflow.run, "tls", id=new_id(), task_queue=queue) == (
                "hello tls"
            )
        # A plaintext client cannot talk to a TLS listener.
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(
                Client.connect(dev.address, namespace=f"main.{org}", api_key=api_key, tls=False), 10
            )
