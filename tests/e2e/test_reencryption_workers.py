"""A namespace's re-encryption runs in the background workers, not in the process that asked for it: on
the production processes (Postgres + the Celery shard worker) a queued job completes with its progress
visible while it moves; a shard worker killed (SIGKILL) mid-job leaves it to the restarted worker, which
finishes it within a lease with every run counted once and nothing left under the old key; on
`perdura dev` the in-process shard loop runs it."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
import uuid
from collections.abc import Callable

import psycopg
from temporalio.client import Client

from tests.e2e import workflows as w
from tests.support import servers

RUNS = 120
FAST = {
    "PERDURA_DATAKEY_REFRESH_SECONDS": "0",  # the job is due 2 s (the commit margin) after the rotation
    "PERDURA_REENCRYPT_BATCH": "2",  # many small transactions: the job is seen (and killed) half way
    "PERDURA_SHARD_LEASE_SECONDS": "3",
}
Row = tuple[int, int, int, bool]
"""A job's (pk, runs_done, runs_total, finished)."""

_JOB = (
    "SELECT r.id, r.runs_done, r.runs_total, r.finished_at IS NOT NULL FROM engine_reencryption r "
    "JOIN tenants_namespace n ON n.id = r.namespace_id WHERE n.name = 'default' ORDER BY r.id DESC LIMIT 1"
)


async def _start_runs(address: str) -> None:
    """Open runs (no SDK worker: each holds its sealed state, history and memo)."""
    client = await Client.connect(address, namespace="default")
    await asyncio.gather(
        *(
            client.start_workflow(
                w.SignalWorkflow.run,
                3,
                id=f"old-{i}-{uuid.uuid4().hex[:6]}",
                task_queue="nobody",
                memo={"m": i},
            )
            for i in range(RUNS)
        )
    )


def _postgres_job(url: str) -> Callable[[], Row | None]:
    def read() -> Row | None:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(_JOB).fetchone()

    return read


def _hold_run(url: str, position: int) -> psycopg.Connection:
    """Lock the history of the namespace's run at `position` (in the job's order) until the returned
    connection closes: the job moves every batch before it, then waits there, so a test sees it half way
    however fast the worker is (60 small batches can finish before the CLI that queued them has exited).
    Only re-encryption updates a history batch in place; the shard worker's other passes go on."""
    conn = psycopg.connect(url)
    conn.execute(
        "SELECT h.id FROM engine_historybatch h WHERE h.execution_id = ("
        "  SELECT e.id FROM engine_execution e JOIN tenants_namespace n ON n.id = e.namespace_id"
        "  WHERE n.name = 'default' ORDER BY e.id OFFSET %s LIMIT 1"
        ") FOR UPDATE",
        (position,),
    )
    return conn


def _follow(read: Callable[[], Row | None], until: Callable[[Row], bool], seconds: float = 60) -> list[Row]:
    """The job's row as seen every 20 ms until `until` holds."""
    seen: list[Row] = []
    deadline = time.monotonic() + seconds
    while True:
        row = read()
        if row is not None:
            seen.append(row)
            if until(row):
                return seen
        assert time.monotonic() < deadline, seen[-3:]
        time.sleep(0.02)


def _assert_moved(running: servers.Running, row: Row) -> None:
    _, done, total, finished = row
    assert finished
    assert (done, total) == (RUNS, RUNS)
    status = running.cli("namespace", "reencrypt", "default", "--status")
    assert re.search(rf"finished .*: {RUNS}/{RUNS} runs", status), status
    assert "; 0 under older versions now" in status, status


async def test_a_queued_job_is_moved_by_the_shard_worker_with_its_progress_visible(tmp_path):
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(tmp_path, url, env=FAST) as running,
    ):
        await _start_runs(running.address)
        running.cli("namespace", "rotate-key", "default", "--no-reencrypt")
        read = _postgres_job(url)
        with _hold_run(url, RUNS // 2):
            out = running.cli("namespace", "reencrypt", "default")
            # The CLI only queued it: the shard worker moves it after the CLI has returned.
            assert "queued for the shard workers" in out, out
            halfway = _follow(read, lambda row: row[1] >= RUNS // 2)[-1]
            assert (halfway[1], halfway[3]) == (RUNS // 2, False), halfway  # progress shows while it moves
        seen = _follow(read, lambda row: row[3])
        _assert_moved(running, seen[-1])
        # `--wait` follows the queued job to its end, as the CLI did when it ran the job itself.
        running.cli("namespace", "rotate-key", "default", "--no-reencrypt")
        out = running.cli("namespace", "reencrypt", "default", "--wait")
        assert "queued for the shard workers" in out, out
        moved = re.search(r"default: (\d+) ciphertexts sealed again under version 3", out)
        assert moved is not None, out
        assert int(moved.group(1)) >= 3 * RUNS  # each run's state, history and memo


async def test_a_shard_worker_killed_mid_job_has_it_finished_by_the_restarted_worker(tmp_path):
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(tmp_path, url, env=FAST) as running,
    ):
        await _start_runs(running.address)
        running.cli("namespace", "rotate-key", "default", "--no-reencrypt")
        read = _postgres_job(url)
        with _hold_run(url, RUNS // 4):
            running.cli("namespace", "reencrypt", "default")
            _follow(read, lambda row: row[1] >= RUNS // 4)
            # Killed while its next batch waits for the held run: that batch never commits.
            running.kill("worker")
        _, at_kill, _, finished = read()
        assert not finished
        assert at_kill < RUNS
        # Nothing moves it while no worker runs (the API and beat do not).
        time.sleep(1)
        assert read()[1] == at_kill
        killed_at = time.monotonic()
        running.spawn("worker", ["worker", "--concurrency", "2"])
        seen = _follow(read, lambda row: row[3])
        # The shard's lease (3 s) runs out, then the new worker resumes from the last committed batch.
        assert time.monotonic() - killed_at < 30
        assert all(row[1] >= at_kill for row in seen)
        _assert_moved(running, seen[-1])


async def test_on_perdura_dev_the_job_runs_in_process(tmp_path):
    with servers.dev_server(tmp_path, env=FAST) as running:
        await _start_runs(running.address)
        running.cli("namespace", "rotate-key", "default", "--no-reencrypt")
        out = running.cli("namespace", "reencrypt", "default", "--wait")
        assert re.search(r"default: \d+ ciphertexts sealed again under version 2", out), out

        def read() -> Row | None:
            with sqlite3.connect(running.db_file) as conn:
                return conn.execute(_JOB).fetchone()

        _assert_moved(running, read())
