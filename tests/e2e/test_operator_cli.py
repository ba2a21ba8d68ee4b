"""The operator's read-only commands against a running Perdura: `perdura org list`, `perdura namespace
list|describe` and `perdura status` see what the SDK did, and a bad name exits non-zero with one line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from tests.e2e.workflows import TimerWorkflow
from tests.support import servers


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def test_lists_describe_and_status_show_what_the_sdk_did(server):
    org = f"inv{uuid.uuid4().hex[:8]}"
    server.cli("org", "create", org, "--owner", f"owner@{org}.example")
    server.cli("namespace", "create", "a", "--org", org, "--retention", "3d")
    server.cli("namespace", "create", "b", "--org", org)

    orgs = {o["slug"]: o for o in _json_lines(server.cli("org", "list", "--json"))}
    assert orgs[org]["namespaces"] == 2
    assert orgs[org]["owners"] == 1
    listed = _json_lines(server.cli("namespace", "list", "--org", org, "--json"))
    assert [n["name"] for n in listed] == [f"a.{org}", f"b.{org}"]
    assert listed[0]["retention_days"] == 3
    assert (listed[0]["retention"], listed[0]["retention_seconds"]) == ("3d", 3 * 86400)
    # The operator may go under a day (down to PERDURA_RETENTION_MIN_SECONDS); the listing shows it exactly.
    assert "retention 90s" in server.cli("namespace", "update", f"b.{org}", "--retention", "90s")
    (b,) = _json_lines(server.cli("namespace", "list", "--org", org, "--json"))[1:]
    assert (b["retention"], b["retention_seconds"], b["retention_days"]) == ("90s", 90, 0)
    assert listed[0]["organization"] == org
    assert "default" not in {n["name"] for n in listed}  # another organisation's stay out

    client = await Client.connect(server.address, namespace=f"a.{org}")
    queue = f"inv-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[TimerWorkflow]):
        done = await client.start_workflow(
            TimerWorkflow.run, 0.01, id=f"inv-{uuid.uuid4()}", task_queue=queue
        )
        assert await done.result() == "woke"
        # One run left waiting on an hour-long timer: open, and a timer that the status counts as later.
        waiting = await client.start_workflow(
            TimerWorkflow.run, 3600.0, id=f"inv-{uuid.uuid4()}", task_queue=queue
        )
        for _ in range(100):
            if EventType.EVENT_TYPE_TIMER_STARTED in [
                e.event_type async for e in waiting.fetch_history_events()
            ]:
                break
            await asyncio.sleep(0.1)
        described = json.loads(server.cli("namespace", "describe", f"a.{org}", "--json"))
        status = json.loads(server.cli("status", "--json"))
    assert described["runs"] == {"open": 1, "closed": 1}
    assert described["data_key_version"] == 1
    assert described["rate_limits"]["actions"]["default"] is True
    assert status["migrations_pending"] == []
    assert sum(s["timers_waiting"] for s in status["shards"]) >= 1
    assert len(status["shards"]) >= 1
    assert set(status["parked"]) == {
        "timer",
        "transfer",
        "visibility",
        "schedule",
        "retention",
        "batch",
        "reencryption",
    }


def test_an_unknown_name_exits_non_zero_with_one_line(dev_server):
    env = dict(dev_server.env, PERDURA_DATABASE_URL=f"sqlite:///{dev_server.db_file}")
    for args in (["namespace", "describe", "no-such.ns"], ["namespace", "list", "--org", "no-such-org"]):
        done = subprocess.run(
            [servers.PERDURA, *args], env=env, capture_output=True, text=True, cwd=servers.ROOT
        )
        assert done.returncode != 0
        assert done.stderr.strip().count("\n") == 0, done.stderr
        assert "no-such" in done.stderr


def test_a_wrong_setting_exits_non_zero_with_what_is_wrong(dev_server):
    """A master key that is not one: a line that names it, no traceback, and no namespace made."""
    env = dict(
        dev_server.env, PERDURA_DATABASE_URL=f"sqlite:///{dev_server.db_file}", PERDURA_MASTER_KEY="abc"
    )
    done = subprocess.run(
        [servers.PERDURA, "namespace", "create", "keyless"],
        env=env,
        capture_output=True,
        text=True,
        cwd=servers.ROOT,
    )
    assert done.returncode != 0
    assert done.stderr.startswith("perdura namespace: PERDURA_MASTER_KEY must be 32 bytes"), done.stderr
    assert "Traceback" not in done.stderr
    assert "keyless" not in dev_server.cli("namespace", "list")
