"""Erasure by key destruction end to end, with the official SDK on `perdura dev` and on Postgres + Celery.

A subject's runs (one closed with a child that inherits the subject, a continue-as-new chain whose next run
inherits it, one closed and already exported, one running with a signal) and another subject's run. `perdura erase` destroys the subject's key: every
payload of its runs reads as the `binary/x-perdura-erased` marker through GetWorkflowExecutionHistory,
with the history's shape kept; the running run is terminated with a reason that says why; the earlier
export's payloads stay sealed under a key that no longer exists; re-exports verify offline; the other
subject's run reads as before; the erasure is in the audit log as the operator's.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import uuid
from pathlib import Path

import psycopg
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from engine.exports import erasure
from engine.persistence import subject_seal
from tests.e2e import workflows as w
from tests.e2e.test_run_export import verify
from tests.support import servers

SUBJECT = SearchAttributeKey.for_keyword("PerduraDataSubject")
SEALED_B64 = base64.b64encode(subject_seal.SEALED).decode()
ERASED_B64 = base64.b64encode(subject_seal.ERASED).decode()


def _attributes(subject: str) -> TypedSearchAttributes:
    return TypedSearchAttributes([SearchAttributePair(SUBJECT, subject)])


def _sql(server, query: str, params: tuple = ()) -> list[tuple]:
    if server.database_url:
        with psycopg.connect(server.database_url) as connection:
            return connection.execute(query.replace("?", "%s"), params).fetchall()
    with sqlite3.connect(server.db_file) as connection:
        return connection.execute(query, params).fetchall()


async def _encodings(handle: WorkflowHandle) -> tuple[set[bytes], str]:
    """The `encoding` of every payload of the run's history as GetWorkflowExecutionHistory answers it,
    and the whole history's bytes as text (to look for a secret in)."""
    found: set[bytes] = set()
    text = ""
    async for event in handle.fetch_history_events():
        subject_seal.each_payload(event, lambda p: found.add(p.metadata.get("encoding", b"")))
        text += event.SerializeToString().decode("latin-1")
    return found, text


SIGNING_KEY = base64.b64encode(os.urandom(32)).decode()
"""For the production processes, which have none (`perdura dev` makes its own)."""


def _export(server, workflow_id: str, path: Path) -> dict:
    env = dict(server.env, PERDURA_DATABASE_URL=server.database_url or f"sqlite:///{server.db_file}")
    env.setdefault("PERDURA_EXPORT_SIGNING_KEY", SIGNING_KEY)
    args = ["export", "run", "--namespace", "default", "--workflow-id", workflow_id, "--output", str(path)]
    done = subprocess.run([servers.PERDURA, *args], env=env, capture_output=True, text=True, cwd=servers.ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(path.read_text())


def _payload_encodings(document: dict) -> set[str]:
    found: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if (
                "metadata" in value
                and isinstance(value["metadata"], dict)
                and "encoding" in value["metadata"]
            ):
                found.add(value["metadata"]["encoding"])
            for key, item in value.items():
                if key != "searchAttributes":  # plaintext by design: they are indexed
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(document["events"])
    return found


async def test_erasing_a_subject_erases_its_payloads_everywhere_and_keeps_the_shape(
    server, client: Client, worker, task_queue, tmp_path
):
    subject, other = f"subject-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    secret = f"SECRET-{uuid.uuid4().hex[:8]}"
    prefix = uuid.uuid4().hex[:8]

    closed = await client.start_workflow(
        w.ParentWorkflow.run,
        f"{secret}-closed",
        id=f"erase-closed-{prefix}",
        task_queue=task_queue,
        search_attributes=_attributes(subject),
    )
    assert await closed.result() == f"hello {secret}-closed"
    child = client.get_workflow_handle(f"erase-closed-{prefix}-child")
    # The child inherited the subject.
    assert (await child.describe()).typed_search_attributes.get(SUBJECT) == subject

    chain = await client.start_workflow(
        w.ContinueAsNewWorkflow.run,
        args=[1, 0],
        id=f"erase-chain-{prefix}",
        task_queue=task_queue,
        search_attributes=_attributes(subject),
    )
    assert await chain.result() == 2
    last_run = client.get_workflow_handle(chain.id)  # the chain's latest run
    first_run = client.get_workflow_handle(chain.id, run_id=chain.result_run_id)
    assert (await last_run.describe()).run_id != chain.result_run_id
    # The next run inherited the subject.
    assert (await last_run.describe()).typed_search_attributes.get(SUBJECT) == subject

    exported = await client.start_workflow(
        w.HelloWorkflow.run,
        f"{secret}-exported",
        id=f"erase-exported-{prefix}",
        task_queue=task_queue,
        search_attributes=_attributes(subject),
        memo={"note": f"{secret}-memo"},
    )
    assert await exported.result() == f"hello {secret}-exported"
    early = _export(server, exported.id, tmp_path / "early.json")
    # Exported with the payloads sealed: the file never held them in the clear.
    assert secret not in json.dumps(early)
    assert _payload_encodings(early) == {SEALED_B64}
    assert verify(tmp_path / "early.json").returncode == 0

    running = await client.start_workflow(
        w.SignalWorkflow.run,
        5,
        id=f"erase-running-{prefix}",
        task_queue=task_queue,
        search_attributes=_attributes(subject),
    )
    await running.signal(w.SignalWorkflow.add, f"{secret}-signal")

    untouched = await client.start_workflow(
        w.HelloWorkflow.run,
        "OTHER-value",
        id=f"erase-other-{prefix}",
        task_queue=task_queue,
        search_attributes=_attributes(other),
    )
    assert await untouched.result() == "hello OTHER-value"
    untouched_before = [e async for e in untouched.fetch_history_events()]

    # Before the erasure, the subject's runs read as the client wrote them.
    encodings, text = await _encodings(running)
    assert f"{secret}-signal" in text
    assert subject_seal.SEALED not in encodings
    shapes = {
        h.id: [(e.event_id, e.event_type) async for e in h.fetch_history_events()] for h in (closed, exported)
    }

    assert await (await exported.describe()).memo_value("note") == f"{secret}-memo"

    out = server.cli("erase", "--namespace", "default", "--subject", subject)
    assert "1 key(s) destroyed, 1 running run(s) terminated" in out, out

    for handle in (closed, child, exported, running, first_run, last_run):
        encodings, text = await _encodings(handle)
        assert encodings == {subject_seal.ERASED}, (handle.id, encodings)
        assert secret not in text, handle.id
        history = await handle.fetch_history()  # the SDK's reader takes the markers
        assert history.events
    for handle in (closed, exported):
        assert [(e.event_id, e.event_type) async for e in handle.fetch_history_events()] == shapes[handle.id]

    # Describe and list answer the memo's marker; the runs are still listed by their subject.
    info = (await exported.describe()).raw_description.workflow_execution_info
    assert info.memo.fields["note"].metadata["encoding"] == subject_seal.ERASED
    listed = [e async for e in client.list_workflows(f"PerduraDataSubject = '{subject}'")]
    assert {e.id for e in listed} >= {closed.id, child.id, exported.id, running.id, chain.id}
    memos = {e.id: e.raw_info.memo for e in listed}
    assert memos[exported.id].fields["note"].metadata["encoding"] == subject_seal.ERASED

    description = await running.describe()
    assert description.status.value == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED
    last = [e async for e in running.fetch_history_events()][-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED
    assert last.workflow_execution_terminated_event_attributes.reason == erasure.REASON

    # The earlier export's payloads are sealed under a key whose row holds no key any more.
    key_ids = {
        base64.b64decode(p["metadata"][subject_seal.KEY_METADATA]).decode()
        for e in early["events"]
        for p in e.get("workflowExecutionStartedEventAttributes", {}).get("input", {}).get("payloads", [])
    }
    assert len(key_ids) == 1
    rows = _sql(
        server, "SELECT id, wrapped_key, erased_at FROM tenants_subjectkey WHERE subject = ?", (subject,)
    )
    assert len(rows) == 1
    assert uuid.UUID(str(rows[0][0])).hex in key_ids
    assert bytes(rows[0][1]) == b""
    assert rows[0][2] is not None
    assert verify(tmp_path / "early.json").returncode == 0

    # Re-exported, the erased histories carry the markers and verify.
    for handle in (closed, exported, running):
        again = _export(server, handle.id, tmp_path / f"{handle.id}.json")
        assert _payload_encodings(again) <= {ERASED_B64}, handle.id
        assert secret not in json.dumps(again)
        checked = verify(tmp_path / f"{handle.id}.json")
        assert checked.returncode == 0, checked.stdout + checked.stderr

    # The other subject's run is untouched.
    untouched_after = [e async for e in untouched.fetch_history_events()]
    # As messages, event by event: protobuf serializes map fields (a payload's metadata) in no fixed
    # order, so the bytes of an unchanged event can differ between two reads.
    assert len(untouched_after) == len(untouched_before)
    for before, after in zip(untouched_before, untouched_after, strict=True):
        assert after == before, f"event {before.event_id} changed:\n{before}\n---\n{after}"
    assert await untouched.result() == "hello OTHER-value"

    entries = _sql(
        server,
        "SELECT actor_kind, via, outcome FROM tenants_auditevent WHERE action = 'subject.erase' AND target = ?",
        (f"subject/{subject}",),
    )
    assert entries == [("operator", "cli", "ok")]
