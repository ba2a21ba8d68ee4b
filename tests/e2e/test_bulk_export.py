"""Bulk export by list query (`perdura export query`), as a compliance team runs it against `perdura dev`:
every matching run once, each file a signed export that verifies offline; a crash mid-way resumes without
a run written twice or left out; the namespace's visibility rate bounds it; S3 works as a folder does."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import uuid

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from engine.exports import manifest
from tests.e2e import workflows as w
from tests.support import servers
from tests.support.s3 import moto_s3

RUNS = 30
PAGE = 3


@pytest.fixture(scope="module")
def exported_server(tmp_path_factory: pytest.TempPathFactory):
    """`perdura dev` holding 30 closed HelloWorkflow runs and 5 other runs; visibility limited to 2/s."""
    with servers.dev_server(tmp_path_factory.mktemp("bulk")) as running:

        async def populate() -> tuple[list[str], list[str]]:
            client = await Client.connect(running.address, namespace="default")
            queue = f"tq-{uuid.uuid4()}"
            async with Worker(
                client, task_queue=queue, workflows=w.ALL_WORKFLOWS, activities=w.ALL_ACTIVITIES
            ):
                hello = await asyncio.gather(
                    *(
                        client.start_workflow(w.HelloWorkflow.run, f"n{i}", id=f"bulk-{i}", task_queue=queue)
                        for i in range(RUNS)
                    )
                )
                await asyncio.gather(*(h.result() for h in hello))
            others = [
                await client.start_workflow(w.SignalWorkflow.run, 1, id=f"other-{i}", task_queue="nobody")
                for i in range(5)
            ]
            return [h.result_run_id for h in hello], [h.result_run_id for h in others]

        hello, others = asyncio.run(populate())
        running.cli("namespace", "update", "default", "--visibility-rps", "2")
        yield running, set(hello), set(others)


def _export_command(running, destination: str) -> list[str]:
    return [
        servers.PERDURA,
        "export",
        "query",
        "--namespace",
        "default",
        "--query",
        "WorkflowType = 'HelloWorkflow'",
        "--to",
        destination,
        "--page-size",
        str(PAGE),
    ]


def _env(running, extra: dict[str, str] | None = None) -> dict[str, str]:
    return dict(running.env, PERDURA_DATABASE_URL=f"sqlite:///{running.db_file}", **(extra or {}))


def _check_exports(documents: dict[str, bytes], expected: set[str]) -> None:
    assert set(documents) == {f"{run_id}.json" for run_id in expected}
    for name, raw in documents.items():
        document = json.loads(raw)
        verdict = manifest.verify(document)
        assert verdict.ok, (name, verdict.message)
        assert name == f"{document['run']['run_id']}.json"


def test_a_crashed_export_resumes_without_duplicates_or_gaps(exported_server, tmp_path):
    running, hello, _others = exported_server
    out = tmp_path / "out"
    first = subprocess.Popen(
        _export_command(running, str(out)),
        env=_env(running),
        cwd=servers.ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    # Stop it hard once a few pages are written, as a crash would.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = out / "_export.json"
        if state.exists() and json.loads(state.read_text())["exported"] >= 3 * PAGE:
            break
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    stopped = json.loads((out / "_export.json").read_text())
    assert not stopped["finished"]
    assert stopped["exported"] < RUNS

    started = time.monotonic()
    done = subprocess.run(
        _export_command(running, str(out)),
        env=_env(running),
        cwd=servers.ROOT,
        capture_output=True,
        text=True,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    state = json.loads((out / "_export.json").read_text())
    assert state["finished"]
    assert state["total"] == RUNS
    assert state["exported"] + state["skipped"] == RUNS
    documents = {p.name: p.read_bytes() for p in out.glob("*.json") if p.name != "_export.json"}
    _check_exports(documents, hello)
    assert not list(out.glob(".partial-*"))
    # The rest took one visibility token per page at 2 a second (after the bucket's burst).
    pages_left = (RUNS - stopped["exported"]) // PAGE
    assert elapsed >= (pages_left - 4) / 2, (elapsed, pages_left)

    # The same destination holds this export: another query is refused rather than mixed in.
    other = subprocess.run(
        [*_export_command(running, str(out))[:-4], "--query", "", "--to", str(out)],
        env=_env(running),
        cwd=servers.ROOT,
        capture_output=True,
        text=True,
    )
    assert other.returncode != 0
    assert "choose another destination" in other.stderr


def test_export_to_s3(exported_server):
    running, hello, _others = exported_server
    with moto_s3() as s3:
        s3.client().create_bucket(Bucket="audits")
        done = subprocess.run(
            _export_command(running, "s3://audits/2026/december"),
            env=_env(running, s3.env),
            cwd=servers.ROOT,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        client = s3.client()
        keys = [
            o["Key"] for o in client.list_objects_v2(Bucket="audits", Prefix="2026/december/")["Contents"]
        ]
        documents = {
            key.rsplit("/", 1)[1]: client.get_object(Bucket="audits", Key=key)["Body"].read()
            for key in keys
            if not key.endswith("/_export.json")
        }
        _check_exports(documents, hello)
        missing = subprocess.run(
            _export_command(running, "s3://no-such-bucket/x"),
            env=_env(running, s3.env),
            cwd=servers.ROOT,
            capture_output=True,
            text=True,
        )
        assert missing.returncode != 0
        assert "cannot use bucket 'no-such-bucket'" in missing.stderr
