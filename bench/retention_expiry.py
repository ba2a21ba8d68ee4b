"""Retention at scale: closed runs expiring on Postgres, archived to a local S3 server, beside another tenant.

Perdura-specific (it loads its own database and starts its own processes). What it does, in one run:

1. **Setup.** A fresh Postgres database; moto's S3 server in a process of its own; the production
   processes (`perdura api`, one `perdura worker`, beat) as the suite starts them. Namespace `expiring`
   archives history and visibility to `s3://bench-archive/...` (set with the `temporal` CLI) and has the
   `CustomerId` attribute; namespace `measured` is another tenant.
2. **Load.** A few template runs of a one-activity workflow are run in `expiring` by the official SDK
   (so every row is the engine's own). Each is then cloned ``--runs`` times in total with ``COPY``: its
   run, current-run, history, visibility, archive-index and retention rows, with a new workflow id
   (same width), a new run id and the run's shard. The history batches and the run's state are opened
   and sealed again under the namespace's key with the new run's associated data, so every clone is a
   real encrypted history that archival must open, pack, seal and verify. Loading through the API would
   take hours and measure the write path (bench/throughput.py does). Retention rows are loaded far in
   the future; any other table holding a template's row stops the load (the clone would be unfaithful).
3. **Baseline** (``--baseline`` s). `measured` starts a trivial workflow ``--rate`` times a second
   through the SDK (an SDK worker in another process runs them); the start latency is recorded. With
   ``--control-hog CORES``, as long again beside busy loops at the lowest CPU priority taking CORES
   cores: what that much CPU taken by anything costs `measured` on this machine.
4. **Expiry.** Every retention row of `expiring` is moved so the due times spread evenly over
   ``--spread`` s from now (one hour by default: 1,000,000 runs is 278 a second). `measured` keeps
   starting workflows throughout; every ``--sample`` s the bench records the rows left, the backlog (due
   and not deleted) and the archives written. Once the spread is over it waits (up to ``--drain`` s) for
   the backlog to empty.
5. **Check and report.** Rows of `expiring` left in every run table (0 expected), archives recorded
   (one per run), a sample of archived runs read back through GetWorkflowExecutionHistory after their
   deletion, the deletion rate of the one shard worker, the start latency of `measured` during the
   expiry against the baseline, and the database size before, after, and after VACUUM FULL.

Usage::

    python bench/retention_expiry.py [--runs 1000000] [--spread 3600] [--baseline 300] [--rate 20]
        [--drain 1800] [--sample 30] [--s3 URL,ACCESS_KEY,SECRET_KEY] [--no-archival]
        [--retention-rate N] [--control-hog CORES] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from temporalio import activity, workflow

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import servers  # noqa: E402

WARM_UP_SECONDS = 15.0
BUCKET = "bench-archive"
EXPIRING, MEASURED = "expiring", "measured"
TEMPLATES = 8
ID_WIDTH = 12
BENCH_MASTER_KEY = base64.b64encode(b"perdura-retention-bench-key-32b!").decode()
PARKED_FAR = timedelta(days=3650)
"""Where the loaded retention rows wait until the expiry phase moves them (ten years on)."""
CHUNK = 20_000
HANDLED = {
    "engine_execution",
    "engine_currentrun",
    "engine_historybatch",
    "engine_retention",
    "visibility_visibilityrecord",
    "visibility_archivedvisibilityrecord",
}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(latencies: list[float]) -> dict[str, float]:
    return {
        "count": len(latencies),
        "p50_ms": round(percentile(latencies, 0.5), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "mean_ms": round(statistics.fmean(latencies), 1) if latencies else float("nan"),
    }


# --------------------------------------------------------------------------- the S3 server


@contextlib.contextmanager
def moto_server(tmp: Path) -> Iterator[tuple[str, int]]:
    """moto's S3 server in its own process (its own interpreter, not this one's event loop): its URL and
    process id."""
    port = servers.free_port()
    log = tmp / "moto.log"
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        servers.wait_for_port(port, proc, log)
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def s3_env(endpoint: str, access_key: str, secret_key: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "AWS_DEFAULT_REGION": "us-east-1",
    }


# --------------------------------------------------------------------------- workflows


@activity.defn(name="bench_charge")
async def charge(order: str) -> str:
    return f"charged {order}"


@workflow.defn(name="BenchOrder", sandboxed=False)
class Order:
    @workflow.run
    async def run(self, order: str) -> str:
        return await workflow.execute_activity(charge, order, start_to_close_timeout=timedelta(seconds=30))


@workflow.defn(name="Measured", sandboxed=False)
class Measured:
    @workflow.run
    async def run(self) -> str:
        return "ok"


def measured_worker(address: str, queue: str, stop: Any) -> None:
    """An SDK worker for `measured`'s workflows, in a process of its own (the bench's clients stay apart)."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    async def serve() -> None:
        client = await Client.connect(address, namespace=MEASURED)
        async with Worker(client, task_queue=queue, workflows=[Measured]):
            await asyncio.to_thread(stop.wait)

    asyncio.run(serve())


async def run_templates(address: str) -> list[str]:
    from temporalio.client import Client
    from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
    from temporalio.worker import Worker

    client = await Client.connect(address, namespace=EXPIRING)
    customer = SearchAttributeKey.for_keyword("CustomerId")
    queue = f"orders-{uuid.uuid4().hex[:8]}"
    ids = [f"exp-{i:0{ID_WIDTH}d}" for i in range(TEMPLATES)]
    async with Worker(client, task_queue=queue, workflows=[Order], activities=[charge]):
        handles = [
            await client.start_workflow(
                Order.run,
                f"order-{i}",
                id=workflow_id,
                task_queue=queue,
                search_attributes=TypedSearchAttributes([SearchAttributePair(customer, f"c-{i % 3}")]),
            )
            for i, workflow_id in enumerate(ids)
        ]
        for handle in handles:
            await handle.result()
    return ids


# --------------------------------------------------------------------------- the clone load


def _django(env: dict[str, str]) -> None:
    """This process set up as the servers are (same database, same master key): for the engine's seals."""
    os.environ.update({k: v for k, v in env.items() if k.startswith(("PERDURA_", "AWS_"))})
    os.environ["DJANGO_SETTINGS_MODULE"] = "perdura.settings"  # not a test run's settings it inherited
    import django

    django.setup()


def _columns(conn: psycopg.Connection, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [r["column_name"] for r in rows]


def _template_rows(conn: psycopg.Connection, namespace_id: uuid.UUID, workflow_ids: list[str]) -> dict:
    """Every row of each template run, by table; fails if a table outside HANDLED holds one."""
    executions = conn.execute(
        "SELECT * FROM engine_execution WHERE namespace_id = %s AND workflow_id = ANY(%s) ORDER BY id",
        [namespace_id, workflow_ids],
    ).fetchall()
    assert len(executions) == len(workflow_ids), "a template run is missing"
    ids = [e["id"] for e in executions]
    found: dict[str, list[dict]] = {"engine_execution": executions}
    others = conn.execute(
        "SELECT table_name FROM information_schema.columns WHERE column_name = 'execution_id' "
        "AND table_schema = 'public'"
    ).fetchall()
    for table in (o["table_name"] for o in others):
        rows = conn.execute(
            f"SELECT * FROM {table} WHERE execution_id = ANY(%s) ORDER BY execution_id", [ids]
        ).fetchall()
        if rows and table not in HANDLED:
            raise RuntimeError(f"{table} holds {len(rows)} rows of the closed template runs: clone it too")
        found[table] = rows
    found["engine_currentrun"] = conn.execute(
        "SELECT * FROM engine_currentrun WHERE namespace_id = %s AND workflow_id = ANY(%s)",
        [namespace_id, workflow_ids],
    ).fetchall()
    for table in HANDLED:
        per_run = len(found.get(table, [])) / len(workflow_ids)
        print(f"  template rows in {table}: {per_run:g} a run", flush=True)
    for record in found["visibility_visibilityrecord"]:
        assert not record["memo"], "templates carry no memo (it is sealed with the run's id)"
    return found


def load(running: servers.Running, runs: int) -> dict[str, Any]:
    """Clone the template runs until `expiring` holds `runs` closed runs; what was loaded."""
    _django(running.env)
    from django.conf import settings

    from engine import ids as engine_ids
    from engine.persistence import encryption

    shards = settings.PERDURA_SHARDS
    started = time.perf_counter()
    templates = asyncio.run(run_templates(running.address))
    with psycopg.connect(running.database_url, row_factory=dict_row) as conn:
        namespace_id = conn.execute(
            "SELECT id FROM tenants_namespace WHERE name = %s", [EXPIRING]
        ).fetchone()["id"]
        # The close is committed with the result; its retention row and archive-index copy with it.
        rows = _template_rows(conn, namespace_id, templates)
        columns = {table: _columns(conn, table) for table in HANDLED}
        first_id = conn.execute("SELECT COALESCE(MAX(id), 0) + 1000 AS n FROM engine_execution").fetchone()[
            "n"
        ]
        far = datetime.now(UTC) + PARKED_FAR
        conn.execute("UPDATE engine_retention SET due_at = %s WHERE namespace_id = %s", [far, namespace_id])
        conn.commit()
        by_execution: dict[int, dict[str, list[dict]]] = {}
        for table, table_rows in rows.items():
            for row in table_rows:
                key = row.get("execution_id") or row.get("id")
                if table == "engine_currentrun":
                    key = next(
                        e["id"] for e in rows["engine_execution"] if e["workflow_id"] == row["workflow_id"]
                    )
                by_execution.setdefault(key, {}).setdefault(table, []).append(row)
        plans = [by_execution[e["id"]] for e in rows["engine_execution"]]
        spacing = timedelta(seconds=3600) / max(runs, 1)

        def clone(k: int) -> dict[str, list[tuple]]:
            plan = plans[k % len(plans)]
            template = plan["engine_execution"][0]
            old_wf, old_run = template["workflow_id"], template["run_id"]
            new_id = first_id + k
            new_wf = f"exp-{TEMPLATES + k:0{ID_WIDTH}d}"
            new_run = str(uuid.uuid4())
            swap = {old_wf: new_wf, old_run: new_run}
            swap_bytes = {a.encode(): b.encode() for a, b in swap.items()}

            def rebytes(blob: bytes) -> bytes:
                for a, b in swap_bytes.items():
                    blob = blob.replace(a, b)
                return blob

            out: dict[str, list[tuple]] = {}
            for table, table_rows in plan.items():
                names = [c for c in columns[table] if not (c == "id" and table != "engine_execution")]
                for row in table_rows:
                    values = []
                    for c in names:
                        v = row[c]
                        if c == "id" or c == "execution_id":
                            v = new_id
                        elif c == "shard":
                            v = engine_ids.shard_for(namespace_id, new_wf, shards)
                        elif table == "engine_execution" and c == "state":
                            plain = encryption.unseal(
                                namespace_id, v, encryption.state_aad(namespace_id, old_run)
                            )
                            v = encryption.seal(
                                namespace_id, rebytes(plain), encryption.state_aad(namespace_id, new_run)
                            )
                        elif table == "engine_historybatch" and c == "data":
                            first = row["first_event_id"]
                            plain = encryption.unseal(
                                namespace_id, v, encryption.history_aad(namespace_id, old_run, first)
                            )
                            v = encryption.seal(
                                namespace_id,
                                rebytes(plain),
                                encryption.history_aad(namespace_id, new_run, first),
                            )
                        elif table == "engine_retention" and c == "due_at":
                            v = far + spacing * k
                        elif isinstance(v, str):
                            v = swap.get(v, v)
                        elif isinstance(v, (bytes, memoryview)):
                            v = rebytes(bytes(v))
                        elif isinstance(v, (dict, list)):
                            v = Jsonb(v)
                        values.append(v)
                    out.setdefault(table, []).append(tuple(values))
            return out

        total = runs - len(templates)
        order = ["engine_execution", *sorted(HANDLED - {"engine_execution"})]
        done = 0
        with conn.cursor() as cur:
            cur.execute("SET synchronous_commit = off")
            while done < total:
                size = min(CHUNK, total - done)
                batch: dict[str, list[tuple]] = {}
                for k in range(done, done + size):
                    for table, table_rows in clone(k).items():
                        batch.setdefault(table, []).extend(table_rows)
                for table in order:
                    if table not in batch:
                        continue
                    names = [c for c in columns[table] if not (c == "id" and table != "engine_execution")]
                    with cur.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN") as copy:
                        for values in batch[table]:
                            copy.write_row(values)
                conn.commit()
                done += size
                if done % 100_000 < CHUNK or done == total:
                    print(
                        f"  {done + len(templates):,} runs ({time.perf_counter() - started:.0f}s)", flush=True
                    )
            cur.execute(
                "SELECT setval(pg_get_serial_sequence('engine_execution', 'id'), "
                "(SELECT MAX(id) FROM engine_execution))"
            )
        conn.commit()
    with psycopg.connect(running.database_url, autocommit=True) as conn:
        for table in order:
            conn.execute(f"VACUUM (ANALYZE) {table}")
    return {"runs": runs, "templates": len(templates), "seconds": round(time.perf_counter() - started, 1)}


# --------------------------------------------------------------------------- measuring

_TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, str, float]]:
    """Every process: its parent, its name and the CPU seconds it has used (user + system)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            raw = (entry / "stat").read_text()
            name = raw[raw.index("(") + 1 : raw.rindex(")")]
            fields = raw[raw.rindex(")") + 2 :].split()
            found[int(entry.name)] = (int(fields[1]), name, (int(fields[11]) + int(fields[12])) / _TICK)
    return found


def cpu_by_part(running: servers.Running, store_pid: int | None) -> dict[str, float]:
    """CPU seconds used so far by each part: the worker and the api (with their children), Postgres, the
    S3 server (moto's process, or radosgw with its OSD and monitor)."""
    table = _processes()

    def tree(root: int) -> float:
        total, todo = 0.0, [root]
        while todo:
            pid = todo.pop()
            if pid in table:
                total += table[pid][2]
                todo += [p for p, (parent, _, _) in table.items() if parent == pid]
        return total

    parts = {name: tree(running.processes[name].pid) for name in ("api", "worker")}
    parts["postgres"] = sum(cpu for _, name, cpu in table.values() if name == "postgres")
    if store_pid is not None:
        parts["s3_server"] = tree(store_pid)
    else:
        parts["s3_server"] = sum(
            cpu for _, name, cpu in table.values() if name in ("radosgw", "ceph-osd", "ceph-mon")
        )
    return parts


def db_sizes(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        sizes = {"database": conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]}
        for table in sorted(HANDLED | {"engine_historyarchive"}):
            sizes[table] = conn.execute("SELECT pg_total_relation_size(%s)", [table]).fetchone()[0]
    return sizes


def counts(url: str, namespace_id: uuid.UUID) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        left = conn.execute("SELECT COUNT(*) FROM engine_retention WHERE namespace_id = %s", [namespace_id])
        due = conn.execute(
            "SELECT COUNT(*) FROM engine_retention WHERE namespace_id = %s AND due_at <= now()",
            [namespace_id],
        )
        parked = conn.execute(
            "SELECT COUNT(*) FROM engine_retention WHERE namespace_id = %s AND parked_at IS NOT NULL",
            [namespace_id],
        )
        archived = conn.execute(
            "SELECT COUNT(*) FROM engine_historyarchive WHERE namespace_id = %s", [namespace_id]
        )
        return {
            "retention_rows_left": left.fetchone()[0],
            "backlog": due.fetchone()[0],
            "parked": parked.fetchone()[0],
            "archived": archived.fetchone()[0],
        }


async def measure_starts(address: str, queue: str, rate: float, stop_at: float) -> tuple[list[float], int]:
    """`measured`'s start latencies (ms) at `rate` a second until `stop_at` (monotonic), and errors."""
    from temporalio.client import Client

    client = await Client.connect(address, namespace=MEASURED)
    latencies: list[float] = []
    errors = 0

    async def one() -> None:
        nonlocal errors
        began = time.perf_counter()
        try:
            await client.start_workflow("Measured", id=f"m-{uuid.uuid4()}", task_queue=queue)
        except Exception:  # noqa: BLE001 - counted, and the run reports it
            errors += 1
            return
        latencies.append((time.perf_counter() - began) * 1000)

    tasks = []
    start = time.monotonic()
    i = 0
    while (due := start + i / rate) < stop_at:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        tasks.append(asyncio.create_task(one()))
        i += 1
    await asyncio.gather(*tasks)
    return latencies, errors


HOG_SLICE = 0.01
"""Seconds of each of the control's duty cycles: it spins for its share of them and sleeps the rest."""


def spin(share: float, stop: Any) -> None:
    """Busy `share` of a core at the lowest CPU priority (nice 19) until `stop` is set: CPU taken from the
    machine and nothing else (no database, no network, no locks)."""
    os.nice(19)
    while not stop.is_set():
        began = time.perf_counter()
        while time.perf_counter() - began < share * HOG_SLICE:
            pass
        time.sleep((1 - share) * HOG_SLICE)


def measure_beside_hog(
    address: str, queue: str, rate: float, seconds: float, cores: float
) -> tuple[list[float], int]:
    """`measure_starts` while processes at nice 19 spin `cores` cores between them: what the same CPU taken
    by anything at all costs `measured` on this machine, the control for what the expiry costs it."""
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    count = max(1, int(-(-cores // 1)))
    hogs = [ctx.Process(target=spin, args=(cores / count, stop), daemon=True) for _ in range(count)]
    for hog in hogs:
        hog.start()
    try:
        return asyncio.run(measure_starts(address, queue, rate, time.monotonic() + seconds))
    finally:
        stop.set()
        for hog in hogs:
            hog.join(timeout=10)


async def expiry(
    args: argparse.Namespace, running: servers.Running, namespace_id: uuid.UUID, queue: str
) -> dict[str, Any]:
    """Spread the due times over `--spread` s from now; measure `measured` meanwhile, then drain."""
    url = running.database_url
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE engine_retention SET due_at = now() + (due_at - (SELECT MIN(due_at) FROM engine_retention "
            "WHERE namespace_id = %s)) * %s WHERE namespace_id = %s",
            [namespace_id, args.spread / 3600, namespace_id],
        )
        conn.execute("VACUUM (ANALYZE) engine_retention")
    began = time.monotonic()
    samples: list[dict[str, Any]] = []

    async def sample_until(stop_at: float) -> None:
        while time.monotonic() < stop_at:
            await asyncio.sleep(min(args.sample, max(0.0, stop_at - time.monotonic())))
            found = await asyncio.to_thread(counts, url, namespace_id)
            found["t"] = round(time.monotonic() - began, 1)
            samples.append(found)
            print(f"  {json.dumps(found)}", flush=True)

    end = began + args.spread
    (latencies, errors), _ = await asyncio.gather(
        measure_starts(running.address, queue, args.rate, end), sample_until(end)
    )
    drain_deadline = time.monotonic() + args.drain
    while time.monotonic() < drain_deadline:
        found = await asyncio.to_thread(counts, url, namespace_id)
        if found["retention_rows_left"] - found["parked"] == 0:
            break
        await asyncio.sleep(5)
    drained = time.monotonic() - began
    last = await asyncio.to_thread(counts, url, namespace_id)
    last["t"] = round(drained, 1)
    samples.append(last)
    return {"latencies": latencies, "errors": errors, "samples": samples, "seconds": drained}


def leftovers(url: str, namespace_id: uuid.UUID) -> dict[str, int]:
    """Rows of `expiring`'s runs left in every run table (the archive index and records stay)."""
    with psycopg.connect(url) as conn:
        found = {}
        for table, where in {
            "engine_execution": "namespace_id = %s",
            "engine_currentrun": "namespace_id = %s",
            "engine_historybatch": "execution_id IN (SELECT id FROM engine_execution WHERE namespace_id = %s)",
            "engine_retention": "namespace_id = %s",
            "visibility_visibilityrecord": "namespace_id = %s",
        }.items():
            found[table] = conn.execute(
                f"SELECT COUNT(*) FROM {table} WHERE {where}", [namespace_id]
            ).fetchone()[0]
        found["visibility_archivedvisibilityrecord (kept)"] = conn.execute(
            "SELECT COUNT(*) FROM visibility_archivedvisibilityrecord WHERE namespace_id = %s", [namespace_id]
        ).fetchone()[0]
        return found


async def read_back(address: str, url: str, namespace_id: uuid.UUID, sample: int) -> dict[str, int]:
    """Read `sample` archived runs' histories through the API, after their deletion."""
    from temporalio.client import Client

    with psycopg.connect(url) as conn:
        runs = conn.execute(
            "SELECT workflow_id, run_id, events FROM engine_historyarchive WHERE namespace_id = %s "
            "ORDER BY random() LIMIT %s",
            [namespace_id, sample],
        ).fetchall()
    client = await Client.connect(address, namespace=EXPIRING)
    good = 0
    for workflow_id, run_id, events in runs:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        good += len(history.events) == events and history.events[-1].HasField(
            "workflow_execution_completed_event_attributes"
        )
    return {"read": len(runs), "complete": good}


def vacuum_full(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for table in sorted(HANDLED):
            conn.execute(f"VACUUM (FULL, ANALYZE) {table}")


async def setup_namespaces(running: servers.Running, archive: bool) -> None:
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
    from temporalio.client import Client

    from tests.support.batches import temporal

    running.cli("namespace", "create", EXPIRING, "--retention", "30d")
    running.cli("namespace", "create", MEASURED)
    if archive:
        await temporal(
            "operator", "namespace", "update",
            "--history-archival-state", "enabled", "--history-uri", f"s3://{BUCKET}/{EXPIRING}/history",
            "--visibility-archival-state", "enabled", "--visibility-uri", f"s3://{BUCKET}/{EXPIRING}/visibility",
            address=running.address, namespace=EXPIRING,
        )  # fmt: skip
    client = await Client.connect(running.address, namespace=EXPIRING)
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=EXPIRING, search_attributes={"CustomerId": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--spread", type=float, default=3600.0, help="seconds the due times spread over")
    parser.add_argument("--baseline", type=float, default=300.0, help="seconds measured before the expiry")
    parser.add_argument("--rate", type=float, default=20.0, help="`measured`'s starts a second")
    parser.add_argument("--drain", type=float, default=1800.0, help="seconds to wait for the backlog after")
    parser.add_argument("--sample", type=float, default=30.0)
    parser.add_argument("--read-back", type=int, default=20, help="archived runs read back at the end")
    parser.add_argument(
        "--s3",
        metavar="URL,ACCESS_KEY,SECRET_KEY",
        help="an S3 server to archive to (e.g. radosgw from infra/scripts/ceph-rgw-up.sh); default: moto's",
    )
    parser.add_argument(
        "--no-archival",
        dest="archival",
        action="store_false",
        help="`expiring` does not archive: retention deletes only (the S3 server is still started)",
    )
    parser.add_argument(
        "--retention-rate",
        default="off",
        help="PERDURA_RETENTION_RATE of the servers: runs deleted a second at most, or `off` (unpaced)",
    )
    parser.add_argument(
        "--control-hog",
        type=float,
        metavar="CORES",
        help="after the baseline, measure `measured` as long again beside busy loops at nice 19 taking this "
        "many cores (e.g. the CPU the expiry adds): the machine's share of the expiry's effect",
    )
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    if not args.archival:
        args.read_back = 0

    import boto3
    from botocore.exceptions import ClientError

    result: dict[str, Any] = {"args": vars(args)}
    with (
        tempfile.TemporaryDirectory(prefix="perdura-retention-bench-") as tmp_name,
        contextlib.ExitStack() as stack,
    ):
        tmp = Path(tmp_name)
        store_pid: int | None = None
        if args.s3:
            endpoint, access_key, secret_key = args.s3.split(",")
        else:
            (endpoint, store_pid), access_key, secret_key = (
                stack.enter_context(moto_server(tmp)),
                "bench",
                "bench",
            )
        store = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            region_name="us-east-1",
        )
        with contextlib.suppress(ClientError):  # a server kept from an earlier run has it already
            store.create_bucket(Bucket=BUCKET)
        url = stack.enter_context(servers.postgres_database())
        env = {
            "PERDURA_MASTER_KEY": BENCH_MASTER_KEY,
            "PERDURA_RETENTION_RATE": args.retention_rate,
            **s3_env(endpoint, access_key, secret_key),
        }
        running = stack.enter_context(servers.production(tmp, url, env=env))
        asyncio.run(setup_namespaces(running, args.archival))
        print(f"loading {args.runs:,} closed runs into {EXPIRING}", flush=True)
        result["load"] = load(running, args.runs)
        print(f"loaded: {result['load']}", flush=True)
        with psycopg.connect(url) as conn:
            namespace_id = conn.execute(
                "SELECT id FROM tenants_namespace WHERE name = %s", [EXPIRING]
            ).fetchone()[0]
        result["size_before"] = db_sizes(url)

        queue = f"measured-{uuid.uuid4().hex[:8]}"
        ctx = multiprocessing.get_context("spawn")
        stop = ctx.Event()
        worker = ctx.Process(target=measured_worker, args=(running.address, queue, stop), daemon=True)
        worker.start()
        try:
            # The first starts pay for connections and cold caches: not what retention does to them.
            asyncio.run(measure_starts(running.address, queue, args.rate, time.monotonic() + WARM_UP_SECONDS))
            print(f"baseline: {args.baseline:.0f}s of {MEASURED} starts at {args.rate}/s", flush=True)
            cpu_baseline = cpu_by_part(running, store_pid)
            latencies, errors = asyncio.run(
                measure_starts(running.address, queue, args.rate, time.monotonic() + args.baseline)
            )
            cpu_alone_end = cpu_by_part(running, store_pid)
            result["baseline"] = {**summary(latencies), "errors": errors}
            print(f"baseline: {result['baseline']}", flush=True)
            if args.control_hog:
                latencies, errors = measure_beside_hog(
                    running.address, queue, args.rate, args.baseline, args.control_hog
                )
                result["control_hog"] = {**summary(latencies), "errors": errors, "cores": args.control_hog}
                print(
                    f"control, {args.control_hog} cores spun at nice 19: {result['control_hog']}", flush=True
                )
            print(f"expiry: due times spread over {args.spread:.0f}s", flush=True)
            cpu_before = cpu_by_part(running, store_pid)
            during = asyncio.run(expiry(args, running, namespace_id, queue))
            cpu_after = cpu_by_part(running, store_pid)
        finally:
            stop.set()
            worker.join(timeout=10)
        result["during_expiry"] = {**summary(during["latencies"]), "errors": during["errors"]}
        result["p99_ratio"] = round(result["during_expiry"]["p99_ms"] / result["baseline"]["p99_ms"], 2)
        if args.control_hog:
            control = result["control_hog"]["p99_ms"]
            result["control_p99_ratio"] = round(control / result["baseline"]["p99_ms"], 2)
            result["p99_ratio_to_control"] = round(result["during_expiry"]["p99_ms"] / control, 2)
        result["samples"] = during["samples"]
        deleted = args.runs - during["samples"][-1]["retention_rows_left"]
        result["deleted"] = deleted
        result["seconds_to_drain"] = round(during["seconds"], 1)
        result["deleted_per_second_per_worker"] = round(deleted / during["seconds"], 1)
        used = {part: cpu_after[part] - cpu_before[part] for part in cpu_after}
        result["cpu_seconds_during_expiry"] = {part: round(v, 1) for part, v in used.items()}
        result["cpu_ms_per_run_deleted"] = {
            part: round(1000 * v / max(deleted, 1), 2) for part, v in used.items()
        }
        # What each part used without the expiry (`measured` alone), and what the expiry added a run.
        alone = {part: (cpu_alone_end[part] - cpu_baseline[part]) / args.baseline for part in cpu_after}
        result["cpu_cores_baseline"] = {part: round(v, 3) for part, v in alone.items()}
        result["cpu_cores_during_expiry"] = {
            part: round(v / during["seconds"], 3) for part, v in used.items()
        }
        result["cpu_ms_per_run_deleted_over_baseline"] = {
            part: round(1000 * (used[part] - alone[part] * during["seconds"]) / max(deleted, 1), 2)
            for part in used
        }
        peak = max(
            (
                (b["archived"] - a["archived"]) / (b["t"] - a["t"])
                for a, b in zip(during["samples"], during["samples"][1:], strict=False)
                if b["t"] > a["t"]
            ),
            default=0.0,
        )
        result["archived_per_second_peak_sample"] = round(peak, 1)
        result["max_backlog"] = max(s["backlog"] for s in during["samples"])
        result["leftovers"] = leftovers(url, namespace_id)
        result["read_back"] = asyncio.run(read_back(running.address, url, namespace_id, args.read_back))
        result["size_after"] = db_sizes(url)
        vacuum_full(url)
        result["size_after_vacuum_full"] = db_sizes(url)
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    ok = (
        result["leftovers"]["engine_execution"] == 0
        and result["read_back"]["complete"] == result["read_back"]["read"]
        and not result["during_expiry"]["errors"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
