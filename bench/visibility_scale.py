"""List and count latency over a million runs in one namespace (visibility at scale, on Postgres).

Two steps:

* **load** (Perdura-specific): a dedicated Postgres database (``--db``, created or, with ``--reuse``,
  reused), migrated with ``perdura migrate``, filled with ``--runs`` visibility records in ``default``
  and ``--noise`` more in a second namespace. It is a visibility benchmark, so the rows are written
  straight into the tables with ``COPY`` (an execution row and its visibility record per run, as the
  engine would leave them after the run's last visible change), not started through the API: a million
  starts would take hours and measure the write path, which ``throughput.py`` already does. The custom
  search attributes are registered first in both namespaces (by Perdura's own service, which gives the
  scalar ones their slot columns), and each record carries its slot values as the engine writes them.
  Secondary indexes are dropped during the copy and rebuilt from their own definitions afterwards, then
  the tables are vacuumed and analysed. A ``perdura api`` is then started on that database.
* **query** (any server, ``--address``): the five custom search attributes are registered if missing
  (OperatorService), then every query below is sent ``--repetitions`` times through the official SDK's
  raw gRPC stubs (``ListWorkflowExecutions`` with page size 100, ``CountWorkflowExecutions``) and p50/p99
  are printed. Times in the queries are relative to the data's anchor (the load time, kept in the
  database; ``--anchor`` with ``--address``).

Usage::

    python bench/visibility_scale.py [--runs 1000000] [--noise 100000] [--reuse] [--drop] [--json out.json]
    python bench/visibility_scale.py --address HOST:PORT --anchor 2026-11-30T12:00:00Z [--namespace default]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import contextlib
import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from temporalio.api.common.v1 import Payload, SearchAttributes
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import (
    CountWorkflowExecutionsRequest,
    ListWorkflowExecutionsRequest,
)
from temporalio.client import Client

ROOT = Path(__file__).resolve().parents[1]
PERDURA = str(Path(sys.executable).parent / "perdura")
PAGE_SIZE = 100
NOISE_NAMESPACE = "bench-noise"
# A fixed key for the benchmark's own throw-away database: it seals nothing (the rows carry no memo).
BENCH_MASTER_KEY = base64.b64encode(b"perdura-visibility-bench-key-32b").decode()

SEARCH_ATTRIBUTES = {
    "CustomerId": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Amount": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "DueAt": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
    "Tags": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
    "Note": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
}

TYPE_NAMES = {
    name: IndexedValueType.Name(t).removeprefix("INDEXED_VALUE_TYPE_").title().replace("_", "")
    for name, t in SEARCH_ATTRIBUTES.items()
}

# --- the data ---------------------------------------------------------------------------------------

# (workflow type, id prefix, share of runs, task queue, carries an Amount)
WORKFLOW_TYPES = [
    ("OrderFulfillment", "order", 0.28, "orders", True),
    ("PaymentCapture", "payment", 0.18, "payments", True),
    ("SendNotification", "notify", 0.14, "notifications", False),
    ("InventorySync", "inventory", 0.09, "inventory", False),
    ("Refund", "refund", 0.07, "payments", True),
    ("ShipmentTracking", "shipment", 0.07, "orders", False),
    ("InvoiceGeneration", "invoice", 0.05, "billing", True),
    ("SubscriptionRenewal", "renewal", 0.04, "billing", True),
    ("FraudReview", "fraud", 0.03, "risk", True),
    ("CustomerOnboarding", "onboard", 0.02, "accounts", False),
    ("DataExport", "export", 0.02, "reports", False),
    ("AccountClosure", "closure", 0.01, "accounts", False),
]
# ExecutionStatus values and their shares: mostly completed, a few running.
STATUSES = [(2, 0.85), (1, 0.03), (3, 0.05), (4, 0.02), (5, 0.02), (7, 0.015), (6, 0.015)]
CUSTOMERS = 10_000
CUSTOMER_SKEW = 1.1
"""Zipf exponent of customers: c-1 has about 14 % of the runs, c-42 about 0.23 %."""
TAGS = [
    "vip",
    "eu",
    "us",
    "apac",
    "b2b",
    "b2c",
    "retry",
    "manual-review",
    "promo",
    "priority",
    "bulk",
    "gift",
]
NOTE_WORDS = tuple(
    " ".join(
        [
            "customer asked about delayed package damaged item wrong size refund requested address changed",
            "payment declined card expired duplicate charge escalated to support resolved by phone warehouse",
            "backorder partial shipment express delivery gift wrap loyalty discount applied",
        ]
    ).split(" ")
)
DAYS = 90


def _cumulative(weights: list[float]) -> list[float]:
    total, out = 0.0, []
    for w in weights:
        total += w
        out.append(total)
    return out


@dataclass(frozen=True)
class Rows:
    """One run as two COPY rows: its execution and its visibility record."""

    execution: tuple[object, ...]
    record: tuple[object, ...]


def _payload(value: object, type_name: str) -> Payload:
    return Payload(
        metadata={"encoding": b"json/plain", "type": type_name.encode()},
        data=json.dumps(value, separators=(",", ":")).encode(),
    )


def _iso(micros: int) -> str:
    return (
        (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)).isoformat().replace("+00:00", "Z")
    )


def generate(
    namespace_id: uuid.UUID,
    first_id: int,
    count: int,
    anchor_us: int,
    seed: int,
    slots: dict[str, str] | None = None,
    slot_columns: tuple[str, ...] = (),
) -> Iterator[Rows]:
    """`count` runs of one namespace, execution ids from `first_id`, started over the 90 days before the anchor.

    Each record ends with its `slot_columns`: the value of the attribute the namespace keeps in each
    (`slots`: attribute name to slot column), or None.
    """
    by_slot = {slot: name for name, slot in (slots or {}).items()}
    rnd = random.Random(seed)
    type_cum = _cumulative([t[2] for t in WORKFLOW_TYPES])
    status_cum = _cumulative([s[1] for s in STATUSES])
    customer_cum = _cumulative([1 / (k**CUSTOMER_SKEW) for k in range(1, CUSTOMERS + 1)])
    span_us = DAYS * 86400 * 10**6
    ns = str(namespace_id)
    for i in range(count):
        name, prefix, _, queue, has_amount = WORKFLOW_TYPES[
            min(bisect.bisect_left(type_cum, rnd.random() * type_cum[-1]), len(WORKFLOW_TYPES) - 1)
        ]
        status = STATUSES[
            min(bisect.bisect_left(status_cum, rnd.random() * status_cum[-1]), len(STATUSES) - 1)
        ][0]
        if status == 1:  # running: mostly started in the last day, some long-lived ones
            age = rnd.random() * 86400 * 10**6 if rnd.random() < 0.7 else rnd.random() * span_us
        else:
            age = rnd.random() * span_us
        start = anchor_us - int(age)
        close = duration = None
        if status != 1:
            seconds = min(rnd.lognormvariate(math.log(30), 2.0), 7 * 86400)
            close = min(start + int(seconds * 10**6), anchor_us)
            duration = (close - start) * 1000
        close_sort = close if close is not None else 2**63 - 1
        workflow_id = f"{prefix}-{first_id + i:09d}"
        run_id = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
        history = rnd.randint(5, 60) if status != 3 else rnd.randint(5, 300)
        custom: dict[str, object] = {}
        attrs = SearchAttributes()
        if rnd.random() < 0.9:
            customer = f"c-{bisect.bisect_left(customer_cum, rnd.random() * customer_cum[-1]) + 1}"
            custom["CustomerId"] = customer
        if has_amount:
            custom["Amount"] = int(rnd.lognormvariate(math.log(4000), 1.2))
        if rnd.random() < 0.3:
            custom["DueAt"] = start + rnd.randint(1, 30) * 86400 * 10**6
        if rnd.random() < 0.6:
            custom["Tags"] = rnd.sample(TAGS, rnd.randint(1, 3))
        if rnd.random() < 0.1:
            custom["Note"] = " ".join(rnd.choices(NOTE_WORDS, k=rnd.randint(3, 12)))
        for key, value in custom.items():
            type_name = TYPE_NAMES[key]
            shown = _iso(value) if key == "DueAt" else value  # type: ignore[arg-type]  # DueAt's values are datetimes
            attrs.indexed_fields[key].CopyFrom(_payload(shown, type_name))
        parent = None
        if rnd.random() < 0.05:
            parent = (
                f"order-{rnd.randint(0, count):09d}",
                str(uuid.UUID(int=rnd.getrandbits(128), version=4)),
            )
        ex_id = first_id + i
        start_dt = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=start)
        close_dt = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=close) if close else None
        yield Rows(
            execution=(ex_id, ns, workflow_id, run_id, ex_id % 16, name, queue, status, start_dt, start_dt, close_dt,
                       history + 1, 1, b""),
            record=(
                ex_id, ns, workflow_id, run_id, name, queue, status, start, start, close, close_sort, duration,
                history, history * rnd.randint(300, 2000), history // 2 + 1,
                parent[0] if parent else None, parent[1] if parent else None,
                parent[0] if parent else workflow_id, parent[1] if parent else run_id, run_id,
                b"", attrs.SerializeToString(), json.dumps(custom, separators=(",", ":")),
                *(custom.get(by_slot[c]) if c in by_slot else None for c in slot_columns),
            ),
        )  # fmt: skip


# --- the load (Perdura on Postgres) -----------------------------------------------------------------

EXECUTION_COLUMNS = (
    "id, namespace_id, workflow_id, run_id, shard, workflow_type, task_queue, status, start_time, "
    "execution_time, close_time, next_event_id, db_version, state"
)
RECORD_COLUMNS = (
    "execution_id, namespace_id, workflow_id, run_id, workflow_type, task_queue, status, start_time, "
    "execution_time, close_time, close_sort, execution_duration, history_length, history_size_bytes, "
    "state_transition_count, parent_workflow_id, parent_run_id, root_workflow_id, root_run_id, first_run_id, "
    "memo, search_attributes, custom"
)
TABLES = ("engine_execution", "visibility_visibilityrecord")


def _env(database_url: str, data_dir: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PERDURA_") and k != "DJANGO_SETTINGS_MODULE"
    }
    env.update(
        PERDURA_DATABASE_URL=database_url,
        PERDURA_MASTER_KEY=BENCH_MASTER_KEY,
        PERDURA_DATA_DIR=data_dir,
        PERDURA_AUTH="loopback",
        PYTHONUNBUFFERED="1",
    )
    return env


def _perdura(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([PERDURA, *args], env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"perdura {' '.join(args)} failed:\n{done.stderr[-4000:]}")


def _loaded_anchor(database_url: str, runs: int, noise: int) -> datetime | None:
    """The anchor of a complete earlier load of the same size in this database, if any."""
    try:
        with psycopg.connect(database_url) as conn:
            row = conn.execute("SELECT anchor, runs, noise FROM bench_visibility_meta").fetchone()
    except psycopg.Error:
        return None
    if row is None or (row[1], row[2]) != (runs, noise):
        return None
    return row[0]


def register_search_attributes(env: dict[str, str], namespaces: list[str]) -> None:
    """Register the custom attributes through Perdura's service (which assigns their slot columns)."""
    attributes = {name: int(t) for name, t in SEARCH_ATTRIBUTES.items()}
    code = (
        "from tenants.models import Namespace\n"
        "from visibility.services import search_attributes_add\n"
        f"for name in {namespaces!r}:\n"
        f"    search_attributes_add(namespace=Namespace.objects.get(name=name), attributes={attributes!r})\n"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], env=env, capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode != 0:
        raise RuntimeError(f"registering the search attributes failed:\n{done.stderr[-4000:]}")


def _copy(cur: psycopg.Cursor, chunk: list[Rows], slot_columns: tuple[str, ...]) -> None:
    with cur.copy(f"COPY engine_execution ({EXECUTION_COLUMNS}) FROM STDIN") as copy:
        for rows in chunk:
            copy.write_row(rows.execution)
    columns = ", ".join([RECORD_COLUMNS, *slot_columns])
    with cur.copy(f"COPY visibility_visibilityrecord ({columns}) FROM STDIN") as copy:
        for rows in chunk:
            copy.write_row(rows.record)


def load(args: argparse.Namespace, database_url: str, env: dict[str, str]) -> datetime:
    """Create, migrate and fill the benchmark database (or reuse a complete earlier load): the anchor."""
    if args.reuse and (anchor := _loaded_anchor(database_url, args.runs, args.noise)) is not None:
        t0 = time.perf_counter()
        _perdura(env, "migrate")  # the schema of this checkout (new indexes are built on the loaded rows)
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("ANALYZE visibility_visibilityrecord")  # columns a migration may have filled
        print(
            f"reusing {args.db} (loaded with anchor {anchor.isoformat()}), migrated in {time.perf_counter() - t0:.1f}s"
        )
        return anchor
    with psycopg.connect(args.admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.db}"')
    t0 = time.perf_counter()
    _perdura(env, "migrate")
    _perdura(env, "namespace", "create", NOISE_NAMESPACE)
    register_search_attributes(env, ["default", NOISE_NAMESPACE])
    print(f"created and migrated {args.db} in {time.perf_counter() - t0:.1f}s")
    anchor = datetime.now(UTC).replace(microsecond=0)
    anchor_us = int(anchor.timestamp()) * 10**6
    with psycopg.connect(database_url) as conn:
        ids = dict(conn.execute("SELECT name, id FROM tenants_namespace").fetchall())
        slots: dict[uuid.UUID, dict[str, str]] = {}
        for namespace_id, name, slot in conn.execute(
            "SELECT namespace_id, name, slot FROM visibility_customsearchattribute WHERE slot IS NOT NULL"
        ).fetchall():
            slots.setdefault(namespace_id, {})[name] = slot
        slot_columns = tuple(sorted({slot for mapping in slots.values() for slot in mapping.values()}))
        print("slot columns: " + ", ".join(f"{n} -> {s}" for n, s in sorted(slots[ids["default"]].items())))
        # Secondary indexes are rebuilt after the copy (much faster than maintaining them row by row).
        indexes = conn.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = ANY(%s) AND NOT EXISTS "
            "(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
            [list(TABLES)],
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        conn.execute("SET synchronous_commit = off")
        t0 = time.perf_counter()
        parts = [(ids["default"], 1, args.runs, 1), (ids[NOISE_NAMESPACE], args.runs + 1, args.noise, 2)]
        with conn.cursor() as cur:
            # The executions of each chunk are copied first, in the same transaction: the foreign key
            # check of the records can be skipped.
            cur.execute("SET session_replication_role = replica")
            done = 0
            for namespace_id, first, count, seed in parts:
                chunk: list[Rows] = []
                runs = generate(
                    namespace_id, first, count, anchor_us, seed, slots.get(namespace_id), slot_columns
                )
                for rows in runs:
                    chunk.append(rows)
                    if len(chunk) == 100_000:
                        _copy(cur, chunk, slot_columns)
                        done += len(chunk)
                        chunk = []
                        print(f"  {done:,} runs ({time.perf_counter() - t0:.0f}s)", flush=True)
                _copy(cur, chunk, slot_columns)
            cur.execute("SET session_replication_role = origin")
        conn.commit()
        print(f"copied {args.runs + args.noise:,} runs in {time.perf_counter() - t0:.1f}s", flush=True)
        t0 = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '1GB'")
        for _, definition in indexes:
            conn.execute(definition)
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('engine_execution', 'id'), %s)", [args.runs + args.noise]
        )
        conn.execute("CREATE TABLE bench_visibility_meta (anchor timestamptz, runs bigint, noise bigint)")
        conn.execute("INSERT INTO bench_visibility_meta VALUES (%s, %s, %s)", [anchor, args.runs, args.noise])
        conn.commit()
        print(f"rebuilt {len(indexes)} indexes in {time.perf_counter() - t0:.1f}s", flush=True)
    t0 = time.perf_counter()
    with psycopg.connect(database_url, autocommit=True) as conn:
        for table in TABLES:
            conn.execute(f"VACUUM (ANALYZE) {table}")
        size = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('visibility_visibilityrecord'))"
        ).fetchone()
    print(
        f"vacuumed and analysed in {time.perf_counter() - t0:.1f}s; visibility table with indexes: {size[0]}"
    )
    return anchor


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def perdura_process(env: dict[str, str], command: str, *args: str) -> Iterator[int]:
    """`perdura <command> --ip 127.0.0.1 --port P <args>` on the benchmark database, once it listens: P."""
    port = _free_port()
    log = Path(env["PERDURA_DATA_DIR"]) / f"{command}.log"
    proc = subprocess.Popen(
        [PERDURA, command, "--ip", "127.0.0.1", "--port", str(port), *args],
        env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"perdura {command} did not start:\n{log.read_text()[-4000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def perdura_api(env: dict[str, str]) -> Iterator[str]:
    """`perdura api` on the benchmark database: its address."""
    with perdura_process(env, "api") as port:
        yield f"127.0.0.1:{port}"


# --- the queries (any server) -----------------------------------------------------------------------


def _ts(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def queries(anchor: datetime) -> list[tuple[str, str, str]]:
    """(name, kind, filter): kind is `list` (first page), `page6` (sixth page) or `count`."""
    day = timedelta(days=1)
    return [
        ("type+status", "list", "WorkflowType = 'Refund' AND ExecutionStatus = 'Running'"),
        ("customer", "list", "CustomerId = 'c-42'"),
        ("hot customer", "list", "CustomerId = 'c-1'"),
        ("last 30 days by start", "list", f"StartTime > '{_ts(anchor - 30 * day)}' ORDER BY StartTime DESC"),
        (
            "failed, closed in a week",
            "list",
            f"ExecutionStatus = 'Failed' AND CloseTime BETWEEN '{_ts(anchor - 14 * day)}' AND '{_ts(anchor - 7 * day)}'",
        ),
        (
            "failed, closed 8 weeks ago",
            "list",
            f"ExecutionStatus = 'Failed' AND CloseTime BETWEEN '{_ts(anchor - 56 * day)}' AND '{_ts(anchor - 49 * day)}'",
        ),
        ("type+status (Failed)", "list", "WorkflowType = 'Refund' AND ExecutionStatus = 'Failed'"),
        (
            "type+status+customer+start",
            "list",
            "WorkflowType = 'Refund' AND ExecutionStatus = 'Running' AND CustomerId = 'c-42' "
            f"AND StartTime < '{_ts(anchor - day)}'",
        ),
        ("overdue (Datetime range)", "list", f"ExecutionStatus = 'Running' AND DueAt < '{_ts(anchor)}'"),
        ("all, page 6", "page6", ""),
        ("type, page 6", "page6", "WorkflowType = 'PaymentCapture'"),
        ("count GROUP BY status", "count", "GROUP BY ExecutionStatus"),
        ("count type+start", "count", f"WorkflowType = 'Refund' AND StartTime > '{_ts(anchor - 30 * day)}'"),
        ("count customer GROUP BY", "count", "CustomerId = 'c-1' GROUP BY ExecutionStatus"),
    ]


async def ensure_search_attributes(client: Client, namespace: str) -> None:
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    missing = {k: v for k, v in SEARCH_ATTRIBUTES.items() if k not in existing.custom_attributes}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )


def _percentile(ordered: list[float], q: float) -> float:
    k = (len(ordered) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


async def measure(args: argparse.Namespace, address: str, anchor: datetime) -> list[dict[str, object]]:
    client = await Client.connect(address, namespace=args.namespace)
    service = client.workflow_service
    await ensure_search_attributes(client, args.namespace)
    results = []
    print(f"\n{args.repetitions} repetitions each, page size {PAGE_SIZE}, anchor {_ts(anchor)}\n")
    print(f"{'query':28s} {'kind':6s} {'rows':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s}")
    for name, kind, text in queries(anchor):
        token = b""
        if kind == "page6":  # walk to page 5 once; then time the request for page 6
            for _ in range(5):
                page = await service.list_workflow_executions(
                    ListWorkflowExecutionsRequest(
                        namespace=args.namespace, query=text, page_size=PAGE_SIZE, next_page_token=token
                    )
                )
                token = page.next_page_token
        samples: list[float] = []
        rows = 0
        for i in range(args.warmup + args.repetitions):
            started = time.perf_counter()
            if kind == "count":
                counted = await service.count_workflow_executions(
                    CountWorkflowExecutionsRequest(namespace=args.namespace, query=text)
                )
                rows = counted.count
            else:
                page = await service.list_workflow_executions(
                    ListWorkflowExecutionsRequest(
                        namespace=args.namespace, query=text, page_size=PAGE_SIZE, next_page_token=token
                    )
                )
                rows = len(page.executions)
            if i >= args.warmup:
                samples.append((time.perf_counter() - started) * 1000)
        ordered = sorted(samples)
        result = {
            "name": name,
            "kind": kind,
            "query": text,
            "rows": rows,
            "p50": round(statistics.median(ordered), 1),
            "p99": round(_percentile(ordered, 0.99), 1),
            "max": round(ordered[-1], 1),
        }
        results.append(result)
        print(
            f"{name:28s} {kind:6s} {rows:9,d} {result['p50']:8.1f} {result['p99']:8.1f} {result['max']:8.1f}"
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="query this server instead of loading and starting Perdura")
    parser.add_argument("--anchor", help="with --address: the data's anchor time (RFC 3339; default now)")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--db", default="perdura_bench_visibility", help="the benchmark's own database")
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--noise", type=int, default=100_000, help="runs in a second namespace")
    parser.add_argument("--reuse", action="store_true", help="keep a complete earlier load of the same size")
    parser.add_argument("--load-only", action="store_true")
    parser.add_argument("--drop", action="store_true", help="drop the database at the end")
    parser.add_argument("--repetitions", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.address:
        anchor = (
            datetime.fromisoformat(args.anchor.replace("Z", "+00:00")) if args.anchor else datetime.now(UTC)
        )
        results = asyncio.run(measure(args, args.address, anchor))
    else:
        base, _, _ = args.admin_url.rpartition("/")
        database_url = f"{base}/{args.db}"
        with tempfile.TemporaryDirectory(prefix="perdura-bench-") as tmp:
            env = _env(database_url, tmp)
            try:
                anchor = load(args, database_url, env)
                results = []
                if not args.load_only:
                    with perdura_api(env) as address:
                        results = asyncio.run(measure(args, address, anchor))
            finally:
                if args.drop:
                    with psycopg.connect(args.admin_url, autocommit=True) as conn:
                        conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"runs": args.runs, "page_size": PAGE_SIZE, "results": results}, out, indent=1)


if __name__ == "__main__":
    main()
    os._exit(0)  # see README "Process exit"
