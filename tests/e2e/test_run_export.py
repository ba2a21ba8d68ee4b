"""Per-run compliance exports end to end (issue 15), against `perdura dev --require-auth` with its REST API.

A run started, signalled and updated through the official SDK with API keys (so the audit log holds
who did it), with an activity, a child and a continue-as-new; exported through the CLI and REST; its
history loads in the SDK's WorkflowHistory and replays with its Replayer, and the real `temporal` CLI
reads it; `perdura export verify` accepts it offline (no Django, no database) and names the first
place of every tampering; another tenant's key, or a key for another namespace, gets 404.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, IndexedValueType
from temporalio.api.operatorservice.v1 import request_response_pb2 as orr
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowHistory
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Replayer, Worker

from engine.exports import manifest
from tests.e2e.conftest import new_id
from tests.e2e.export_workflows import (
    EXPORT_ACTIVITIES,
    EXPORT_WORKFLOWS,
    AuditedWorkflow,
    ManySignalsWorkflow,
)
from tests.e2e.workflows import HelloWorkflow
from tests.support import servers

TEMPORAL = str(Path(servers.PERDURA).parent / "temporal")
CASE = SearchAttributeKey.for_keyword("ExportCase")


@dataclass
class Setup:
    server: servers.Running
    base: str
    ns: str
    other_ns: str
    ns_b: str
    ns_id: str = ""
    keys: dict[str, str] = field(default_factory=dict)
    workflow_id: str = ""
    first_run: str = ""
    second_run: str = ""
    child_run: str = ""


def _key(server, org: str, namespace: str, role: str, name: str) -> str:
    out = server.cli(
        "apikey", "create", "--org", org, "--namespace", namespace, "--role", role, "--name", name
    )
    return next(word for word in out.split() if word.startswith("pdk_") and len(word) > 20)


def rest(setup: Setup, path: str, key: str) -> tuple[int, bytes]:
    request = urllib.request.Request(setup.base + path, headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


async def connect(setup: Setup, namespace: str, key: str) -> Client:
    return await Client.connect(setup.server.address, namespace=namespace, api_key=key, tls=False)


@pytest.fixture(scope="module")
async def setup(tmp_path_factory):
    ui_port = servers.free_port()
    with servers.dev_server(
        tmp_path_factory.mktemp("export"), extra=("--ui-port", str(ui_port), "--require-auth")
    ) as server:
        servers.wait_for_port(ui_port, server.processes["dev"], server.logs["dev"])
        suffix = uuid.uuid4().hex[:6]
        org_a, org_b = f"a{suffix}", f"b{suffix}"
        server.cli("org", "create", org_a, "--owner", f"owner@{org_a}.example")
        server.cli("org", "create", org_b, "--owner", f"owner@{org_b}.example")
        for name, org in (("ops", org_a), ("other", org_a), ("ops", org_b)):
            server.cli("namespace", "create", name, "--org", org)
        s = Setup(
            server=server,
            base=f"http://127.0.0.1:{ui_port}",
            ns=f"ops.{org_a}",
            other_ns=f"other.{org_a}",
            ns_b=f"ops.{org_b}",
        )
        s.keys["admin"] = _key(server, org_a, s.ns, "admin", "case admin")
        s.keys["operator"] = _key(server, org_a, s.ns, "operator", "case operator")
        s.keys["reader"] = _key(server, org_a, s.ns, "reader", "auditor")
        s.keys["other"] = _key(server, org_a, s.other_ns, "admin", "other namespace")
        s.keys["b"] = _key(server, org_b, s.ns_b, "admin", "tenant b")
        await _audited_run(s)
        yield s


async def _audited_run(s: Setup) -> None:
    admin = await connect(s, s.ns, s.keys["admin"])
    await admin.operator_service.add_search_attributes(
        orr.AddSearchAttributesRequest(
            namespace=s.ns, search_attributes={"ExportCase": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}
        )
    )
    client = await connect(s, s.ns, s.keys["operator"])
    queue = f"tq-{uuid.uuid4()}"
    s.workflow_id = new_id("audited")
    async with Worker(client, task_queue=queue, workflows=EXPORT_WORKFLOWS, activities=EXPORT_ACTIVITIES):
        handle = await client.start_workflow(
            AuditedWorkflow.run,
            0,
            id=s.workflow_id,
            task_queue=queue,
            memo={"case": "c-42"},
            search_attributes=TypedSearchAttributes([SearchAttributePair(CASE, "c-42")]),
        )
        await handle.signal(AuditedWorkflow.approve, "dora")
        assert await handle.execute_update(AuditedWorkflow.note, "checked") == 1
        assert await handle.result() == "generation 1"
    s.first_run = handle.first_execution_run_id
    s.second_run = (await handle.describe()).run_id
    child = await client.get_workflow_handle(f"{s.workflow_id}-child").describe()
    s.child_run = child.run_id
    assert s.first_run
    assert s.second_run not in ("", s.first_run)
    status, body = rest(s, "/api/v1/namespaces/", s.keys["reader"])
    assert status == 200, body
    listing = json.loads(body)
    rows = listing["results"] if isinstance(listing, dict) else listing
    s.ns_id = next(row["id"] for row in rows if row["name"] == s.ns)


def cli_export(s: Setup, path: Path, *, run_id: str | None = None) -> dict:
    args = ["export", "run", "--namespace", s.ns, "--workflow-id", s.workflow_id, "--output", str(path)]
    if run_id:
        args += ["--run-id", run_id]
    s.server.cli(*args)
    return json.loads(path.read_bytes())


def verify(path: Path, *extra: str) -> subprocess.CompletedProcess:
    """`perdura export verify` as an auditor runs it: no database settings, no Perdura environment."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PERDURA_") and k != "DJANGO_SETTINGS_MODULE"
    }
    return subprocess.run(
        [servers.PERDURA, "export", "verify", str(path), *extra],
        env=env,
        capture_output=True,
        text=True,
        cwd=path.parent,
    )


def public_key(s: Setup, tmp_path: Path) -> Path:
    pem = tmp_path / "installation.pem"
    pem.write_text(s.server.cli("export", "key"))
    return pem


async def test_cli_export_holds_history_audit_attributes_links_and_verifies(setup, tmp_path):
    path = tmp_path / "first.json"
    doc = cli_export(setup, path, run_id=setup.first_run)
    assert doc["format"] == "perdura.run-export/1"

    # The file is a History as `temporal workflow show -o json` prints it, plus Perdura's sections: the SDK
    # loads the file as it is and replays it.
    history = WorkflowHistory.from_json(setup.workflow_id, path.read_text())
    assert history.run_id == setup.first_run
    types = [e.event_type for e in history.events]
    assert len(types) == doc["run"]["history_length"] == len(doc["events"])
    assert history.events[-1].HasField("workflow_execution_continued_as_new_event_attributes")
    replayed = await Replayer(workflows=[AuditedWorkflow, HelloWorkflow]).replay_workflow(history)
    assert replayed.replay_failure is None

    # Who started, signalled and updated it, through which interface, from where, with what outcome.
    by_action = {e["action"]: e for e in doc["audit"]}
    assert {"StartWorkflowExecution", "SignalWorkflowExecution", "UpdateWorkflowExecution"} <= set(by_action)
    operator_prefix = setup.keys["operator"][:16]
    for action in ("StartWorkflowExecution", "SignalWorkflowExecution", "UpdateWorkflowExecution"):
        entry = by_action[action]
        assert entry["actor"] == {"kind": "key", "id": operator_prefix, "label": "case operator"}, entry
        assert (entry["via"], entry["outcome"], entry["code"]) == ("grpc", "ok", "OK")
        assert entry["source"]
        assert entry["namespace"] == setup.ns
    assert by_action["SignalWorkflowExecution"]["details"]["signal_name"] == "approve"
    assert by_action["UpdateWorkflowExecution"]["details"]["update_name"] == "note"
    assert all(e["target"].startswith(f"workflow/{setup.workflow_id}") for e in doc["audit"])

    run = doc["run"]
    assert (run["namespace"], run["workflow_id"], run["run_id"]) == (
        setup.ns,
        setup.workflow_id,
        setup.first_run,
    )
    assert run["status"] == "WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW"
    assert run["memo"]["fields"]["case"]["metadata"]["encoding"]  # a payload, as the SDK's Memo JSON
    assert "ExportCase" in run["search_attributes"]["indexedFields"]

    links = doc["links"]
    assert links["next_run"] == {"run_id": setup.second_run, "reason": "continued_as_new"}
    assert [(c["workflow_id"], c["run_id"], c["outcome"]) for c in links["children"]] == [
        (f"{setup.workflow_id}-child", setup.child_run, "started")
    ]
    assert links["parent"] is None
    assert links["first_execution_run_id"] == setup.first_run

    done = verify(path, "--public-key", str(public_key(setup, tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified" in done.stdout
    assert f"{len(types)} events" in done.stdout


async def test_the_next_run_and_the_child_link_back_and_keep_their_own_audit(setup, tmp_path):
    second = cli_export(setup, tmp_path / "second.json")  # no --run-id: the current run
    assert second["run"]["run_id"] == setup.second_run
    assert second["links"]["continued_from_run_id"] == setup.first_run
    assert second["links"]["next_run"] is None
    # The start, signal and update were the first run's: none of them is attributed to the second.
    assert not {"StartWorkflowExecution", "SignalWorkflowExecution", "UpdateWorkflowExecution"} & {
        e["action"] for e in second["audit"]
    }
    s = setup
    child = tmp_path / "child.json"
    s.server.cli(
        "export",
        "run",
        "--namespace",
        s.ns,
        "--workflow-id",
        f"{s.workflow_id}-child",
        "--output",
        str(child),
    )
    parent = json.loads(child.read_bytes())["links"]["parent"]
    assert (parent["workflow_id"], parent["run_id"]) == (s.workflow_id, s.first_run)
    assert verify(tmp_path / "second.json").returncode == 0
    assert verify(child).returncode == 0


async def test_the_temporal_cli_reads_the_export_as_a_history(setup, tmp_path):
    path = tmp_path / "run.json"
    doc = cli_export(setup, path, run_id=setup.first_run)
    # The CLI's reader of history files (1.9 has no `workflow show --input`): it parses the file as a
    # History, ignoring Perdura's sections, and re-serialises it.
    done = subprocess.run(
        [TEMPORAL, "workflow", "fix-history-json", "--source", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    events = json.loads(done.stdout)["events"]
    assert len(events) == len(doc["events"])
    assert events[-1]["eventType"] == doc["events"][-1]["eventType"]


async def test_rest_export_for_a_reader_is_audited_and_verifies(setup, tmp_path):
    s = setup
    path = f"/api/v1/namespaces/{s.ns_id}/export/run/?workflow_id={s.workflow_id}&run_id={s.first_run}"
    status, body = rest(s, path, s.keys["reader"])
    assert status == 200, body
    exported = tmp_path / "rest.json"
    exported.write_bytes(body)
    doc = json.loads(body)
    assert doc["run"]["run_id"] == s.first_run
    history = WorkflowHistory.from_json(s.workflow_id, body.decode())
    assert (
        await Replayer(workflows=[AuditedWorkflow, HelloWorkflow]).replay_workflow(history)
    ).replay_failure is None
    assert verify(exported, "--public-key", str(public_key(s, tmp_path))).returncode == 0

    # The REST export is itself recorded against the run, so the next export names it, by key and via REST.
    later = cli_export(s, tmp_path / "later.json", run_id=s.first_run)
    exports = [e for e in later["audit"] if e["action"] == "export.run"]
    assert any(
        e["via"] == "rest"
        and e["actor"]["id"] == s.keys["reader"][:16]
        and e["details"]["head"] == doc["manifest"]["head"]
        for e in exports
    ), exports


async def test_other_tenants_and_other_namespaces_keys_cannot_export_the_run(setup):
    s = setup
    path = f"/api/v1/namespaces/{s.ns_id}/export/run/?workflow_id={s.workflow_id}"
    missing = f"/api/v1/namespaces/{s.ns_id}/export/run/?workflow_id=no-such-{uuid.uuid4()}"
    assert rest(s, missing, s.keys["reader"])[0] == 404
    for key in ("b", "other"):
        status, body = rest(s, path, s.keys[key])
        assert status == 404, (key, body)
        assert s.workflow_id.encode() not in body


async def test_a_reset_is_linked_and_audited_on_the_run_it_reset(setup, tmp_path):
    s = setup
    client = await connect(s, s.ns, s.keys["operator"])
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=EXPORT_WORKFLOWS, activities=EXPORT_ACTIVITIES):
        handle = await client.start_workflow(ManySignalsWorkflow.run, id=new_id("reset"), task_queue=queue)
        await handle.signal(ManySignalsWorkflow.tick, 1)
        old_run = handle.result_run_id
        finished = await wait_for_event(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        reset = await client.workflow_service.reset_workflow_execution(
            ResetWorkflowExecutionRequest(
                namespace=s.ns,
                workflow_execution=WorkflowExecution(workflow_id=handle.id, run_id=old_run),
                workflow_task_finish_event_id=finished,
                reason="export test",
                request_id=str(uuid.uuid4()),
            )
        )
        await client.get_workflow_handle(handle.id).signal(ManySignalsWorkflow.stop)
        await client.get_workflow_handle(handle.id).result()
    args = ["export", "run", "--namespace", s.ns, "--workflow-id", handle.id]
    s.server.cli(*args, "--run-id", reset.run_id, "--output", str(tmp_path / "new.json"))
    s.server.cli(*args, "--run-id", old_run, "--output", str(tmp_path / "old.json"))
    new = json.loads((tmp_path / "new.json").read_bytes())
    old = json.loads((tmp_path / "old.json").read_bytes())
    assert new["links"]["reset_from"]["base_run_id"] == old_run
    assert old["run"]["status"] == "WORKFLOW_EXECUTION_STATUS_TERMINATED"
    resets = [e for e in old["audit"] if e["action"] == "ResetWorkflowExecution"]
    assert [(e["target"], e["outcome"], e["details"]) for e in resets] == [
        (f"workflow/{handle.id}/{old_run}", "ok", {"workflow_task_finish_event_id": finished})
    ]
    # The reset names the old run: the new run's export does not claim it; the stop signal is the new run's.
    assert "ResetWorkflowExecution" not in {e["action"] for e in new["audit"]}
    assert "SignalWorkflowExecution" in {e["action"] for e in new["audit"]}
    for path in (tmp_path / "new.json", tmp_path / "old.json"):
        assert verify(path).returncode == 0


async def test_a_termination_by_workflow_id_after_the_close_is_the_runs(setup, tmp_path):
    """A terminate naming only the workflow id is recorded after the run closed (the interceptor writes
    after the call): it is attributed to the run, which was current until a next run starts."""
    s = setup
    client = await connect(s, s.ns, s.keys["operator"])
    handle = await client.start_workflow(
        ManySignalsWorkflow.run, id=new_id("terminated"), task_queue=f"tq-{uuid.uuid4()}"
    )
    await client.get_workflow_handle(handle.id).terminate(reason="case closed")
    path = tmp_path / "terminated.json"
    s.server.cli("export", "run", "--namespace", s.ns, "--workflow-id", handle.id, "--output", str(path))
    doc = json.loads(path.read_bytes())
    assert doc["run"]["status"] == "WORKFLOW_EXECUTION_STATUS_TERMINATED"
    terminations = [e for e in doc["audit"] if e["action"] == "TerminateWorkflowExecution"]
    assert [(e["target"], e["outcome"], e["actor"]["id"]) for e in terminations] == [
        (f"workflow/{handle.id}", "ok", s.keys["operator"][:16])
    ]
    closed = datetime.fromisoformat(doc["run"]["close_time"])
    assert datetime.fromisoformat(terminations[0]["time"]) > closed
    assert doc["events"][-1]["workflowExecutionTerminatedEventAttributes"]["reason"] == "case closed"


async def wait_for_event(handle, event_type: int, timeout: float = 15) -> int:
    """The id of the first event of `event_type` in the run's history, once there."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        async for event in handle.fetch_history_events():
            if event.event_type == event_type:
                return event.event_id
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no {EventType.Name(event_type)} in {handle.id}")


# --- tampering ---------------------------------------------------------------------------------------


@pytest.fixture
def exported(setup, tmp_path) -> tuple[Path, dict, Path]:
    path = tmp_path / "original.json"
    doc = cli_export(setup, path, run_id=setup.first_run)
    return path, doc, public_key(setup, tmp_path)


def _write(tmp_path: Path, name: str, doc: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _failure(path: Path, pem: Path) -> str:
    done = verify(path, "--public-key", str(pem))
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout


def _event_label(doc: dict, index: int) -> str:
    event = doc["events"][index]
    return f"event {event['eventId']} ({event['eventType'].removeprefix('EVENT_TYPE_')})"


async def test_an_untouched_export_verifies_and_reformatting_does_not_matter(exported, tmp_path):
    path, doc, pem = exported
    assert verify(path, "--public-key", str(pem)).returncode == 0
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(doc, indent=2))  # what `jq .` would make of it
    assert verify(pretty, "--public-key", str(pem)).returncode == 0


async def test_one_changed_byte_of_one_event_is_named(exported, tmp_path):
    path, doc, pem = exported
    raw = bytearray(path.read_bytes())
    index = 4
    event_id = doc["events"][index]["eventId"]
    start = raw.index(f'"eventId":"{event_id}"'.encode())
    digit = raw.index(b'"eventTime":"', start) + len(b'"eventTime":"') + 3  # a digit of the year
    raw[digit] = ord("7") if raw[digit] != ord("7") else ord("8")
    path.write_bytes(bytes(raw))
    assert f"{_event_label(doc, index)} was changed" in _failure(path, pem)


async def test_a_dropped_audit_entry_is_named(exported, tmp_path):
    _, doc, pem = exported
    dropped = copy.deepcopy(doc)
    gone = dropped["audit"].pop(1)
    out = _failure(_write(tmp_path, "dropped.json", dropped), pem)
    assert f"audit entry {gone['id']} ({gone['action']}) was removed" in out


async def test_two_swapped_events_are_named(exported, tmp_path):
    _, doc, pem = exported
    swapped = copy.deepcopy(doc)
    events = swapped["events"]
    events[5], events[6] = events[6], events[5]
    out = _failure(_write(tmp_path, "swapped.json", swapped), pem)
    assert f"{_event_label(doc, 5)} was reordered" in out


async def test_an_inserted_event_is_named(exported, tmp_path):
    _, doc, pem = exported
    inserted = copy.deepcopy(doc)
    extra = copy.deepcopy(inserted["events"][3])
    extra["eventId"] = "999"
    inserted["events"].insert(3, extra)
    out = _failure(_write(tmp_path, "inserted.json", inserted), pem)
    assert "event 999" in out
    assert "was inserted" in out


async def test_a_changed_search_attribute_is_named(exported, tmp_path):
    _, doc, pem = exported
    changed = copy.deepcopy(doc)
    changed["run"]["memo"] = {}
    assert "the run section was changed" in _failure(_write(tmp_path, "memo.json", changed), pem)


async def test_a_reexport_resigned_with_another_key_fails_against_the_installation_key(exported, tmp_path):
    _, doc, pem = exported
    forged = copy.deepcopy(doc)
    forged["events"][2]["eventTime"] = "2001-01-01T00:00:00Z"
    del forged["manifest"]
    forged["manifest"] = manifest.sign(
        subject=doc["manifest"]["subject"], document=forged, key=Ed25519PrivateKey.generate(), created_at="x"
    )
    path = _write(tmp_path, "forged.json", forged)
    out = _failure(path, pem)
    assert "signature does not hold" in out
    assert "signed with another key" in out
    # Without the published key the forgery is self-consistent: the verifier says whose key it checked.
    alone = verify(path)
    assert alone.returncode == 0
    assert forged["manifest"]["key"]["fingerprint"] in alone.stdout
    assert "--public-key" in alone.stderr


def test_the_verifier_needs_neither_django_nor_a_database(exported):
    path, _, pem = exported
    script = (
        "import sys\n"
        "from perdura import cli\n"
        "try:\n"
        f"    cli.main(['export', 'verify', {str(path)!r}, '--public-key', {str(pem)!r}])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "assert 'django' not in sys.modules, 'the verifier imported Django'\n"
        "assert not any(m.startswith(('psycopg', 'tenants', 'engine.models')) for m in sys.modules)\n"
        "print('clean')\n"
    )
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PERDURA_") and k != "DJANGO_SETTINGS_MODULE"
    }
    env["PERDURA_DATABASE_URL"] = "postgres://nobody@127.0.0.1:1/none"  # unreachable, were it used
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, cwd=path.parent
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clean" in done.stdout


# --- production -----------------------------------------------------------------------------------------


async def test_production_exports_need_the_configured_key_and_verify_against_it(production_server, tmp_path):
    """On Postgres, outside dev, the signing key comes only from PERDURA_EXPORT_SIGNING_KEY: without it
    the export refuses (and names the variable); with it the file verifies against `perdura export key`."""
    server = production_server
    client = await Client.connect(server.address, namespace="default")
    queue = f"tq-{uuid.uuid4()}"
    workflow_id = new_id("prod-export")
    async with Worker(client, task_queue=queue, workflows=EXPORT_WORKFLOWS, activities=EXPORT_ACTIVITIES):
        assert await client.execute_workflow(HelloWorkflow.run, "pg", id=workflow_id, task_queue=queue)
    out = tmp_path / "prod.json"
    args = ["export", "run", "--namespace", "default", "--workflow-id", workflow_id, "--output", str(out)]
    env = dict(server.env, PERDURA_DATABASE_URL=server.database_url)
    refused = subprocess.run([servers.PERDURA, *args], env=env, capture_output=True, text=True)
    assert refused.returncode != 0
    assert "PERDURA_EXPORT_SIGNING_KEY is not set" in refused.stderr
    assert not out.exists()

    keyed = dict(
        env,
        PERDURA_EXPORT_SIGNING_KEY=subprocess.check_output([servers.PERDURA, "export", "keygen"], text=True),
    )
    done = subprocess.run([servers.PERDURA, *args], env=keyed, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    pem = tmp_path / "prod.pem"
    pem.write_text(subprocess.check_output([servers.PERDURA, "export", "key"], env=keyed, text=True))
    checked = verify(out, "--public-key", str(pem))
    assert checked.returncode == 0, checked.stdout
    doc = json.loads(out.read_bytes())
    start = next(e for e in doc["audit"] if e["action"] == "StartWorkflowExecution")
    assert start["actor"] == {"kind": "operator", "id": "loopback", "label": ""}
    history = WorkflowHistory.from_json(workflow_id, out.read_text())
    assert (await Replayer(workflows=[HelloWorkflow]).replay_workflow(history)).replay_failure is None
    # A key other than the published one does not verify it.
    other = tmp_path / "other.pem"
    other.write_text(manifest.public_pem(Ed25519PrivateKey.generate().public_key()))
    assert verify(out, "--public-key", str(other)).returncode == 1
