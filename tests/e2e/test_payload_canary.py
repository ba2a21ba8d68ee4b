"""The payload canary (issue 15): a unique string sent as a run's input, memo, signal, update and query
arguments, an activity's input, heartbeat, failure and result, two children's inputs, result and failure,
a continue-as-new's input, the workflow's result, a schedule's action input and memos, and a termination's
details appears in no
store Perdura writes -- no raw `pg_dump`, no file of the database in the Postgres data folder, no WAL segment, no line of the Postgres server's log, no
SQLite file, no Redis key (nor any command sent to Redis while the run went on), no OpenSearch document,
no S3 archive object, no log line of any process and no other file of the data folder -- in clear, hex,
base64 or base64 of its JSON encoding.

Two runs per server mode: one kept, one in a namespace kept 1 s that archives to S3 (moto's server), so
the archive objects are checked after retention archived and deleted the run. Each store has a positive
control (the run's workflow id, stored plaintext by design, or another string known to be there), so no
check passes by reading nothing. A store this machine does not let the test read (the WAL needs root or
the postgres user) skips the test, by name, once every other store has passed.

The canary is never put in a search attribute or a workflow id: those are plaintext by design, for
indexing and listing (DESIGN.md rule 6 seals payloads, not ids or search attributes).
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import subprocess
import time
import urllib.request
import uuid
import zlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
import redis
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.conftest import SERVER_ENV
from tests.e2e.canary_workflows import CanaryChildWorkflow, PayloadCanaryWorkflow, canary_echo
from tests.e2e.test_archival import wait_deleted
from tests.support import opensearch, servers
from tests.support.s3 import S3, moto_s3

BUCKET = "perdura-canary"


def base64_forms(data: bytes) -> set[bytes]:
    """What any base64 text of bytes holding `data` (at any offset) must contain: `data` encoded at each of
    the three alignments, less the characters that mix in the bytes around it (standard and URL-safe)."""
    forms = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data)
        start = (shift * 4 + 2) // 3  # the first character that depends on `data` only
        end = (len(data) + shift) // 3 * 4  # the last complete group
        forms.add(encoded[start:end])
    return forms | {f.replace(b"+", b"-").replace(b"/", b"_") for f in forms}


def needles(canary: str) -> dict[bytes, str]:
    """Each form the canary could take in a store, and its name.

    A payload's data is the JSON encoding of the value (`"canary-..."`), whose JSON-escaped forms hold the
    canary's own bytes; protobuf JSON and OpenSearch documents carry bytes as base64; pg_dump writes bytea
    as hex; a base64 text may itself be base64-encoded (a JSON document stored as bytes)."""
    raw = canary.encode()
    found = {raw: "clear", raw.hex().encode(): "hex"}
    for form in base64_forms(json.dumps(canary).encode()[1:-1]):
        found[form] = "base64"
        found[form.hex().encode()] = "hex of base64"
        for twice in base64_forms(form):
            found[twice] = "base64 of base64"
    return found


def test_the_needles_find_a_canary_wrapped_any_way():
    """The forms would catch the canary inside a payload, a JSON document or base64 at any offset."""
    canary = f"canary-{secrets.token_hex(8)}"
    forms = needles(canary)
    payload = json.dumps(f"{canary}-input").encode()
    for prefix in (b"", b"x", b"xy", b"\x0a\x1b\x22"):
        wrapped = [
            prefix + payload,
            base64.b64encode(prefix + payload),
            base64.urlsafe_b64encode(prefix + payload),
            (prefix + payload).hex().encode(),
            json.dumps({"data": base64.b64encode(prefix + payload).decode()}).encode(),
            base64.b64encode(prefix + base64.b64encode(prefix + payload)),
        ]
        for blob in wrapped:
            assert any(n in blob for n in forms), blob
    assert not any(n in payload for n in needles(f"canary-{secrets.token_hex(8)}"))
    # A compressed leak in an archive object is inflated before the search.
    assert canary.encode() in inflated(b'{"header": 1}\n' + zlib.compress(payload) + b"tail")


def leaks(stores: dict[str, bytes], canary: str) -> list[str]:
    forms = needles(canary)
    return [f"{name}: {kind}" for name, blob in stores.items() for n, kind in forms.items() if n in blob]


def holding(stores: dict[str, bytes], marker: str) -> list[str]:
    return [name for name, blob in stores.items() if marker.encode() in blob]


# The runs.


async def run_one(address: str, namespace: str, canary: str) -> str:
    """One run carrying the canary in every kind of payload; its workflow id."""
    client = await Client.connect(address, namespace=namespace)
    queue = f"tq-{uuid.uuid4()}"
    workflow_id = f"payload-run-{uuid.uuid4()}"  # plaintext by design: never the canary
    async with Worker(
        client,
        task_queue=queue,
        workflows=[PayloadCanaryWorkflow, CanaryChildWorkflow],
        activities=[canary_echo],
    ):
        handle = await client.start_workflow(
            PayloadCanaryWorkflow.run,
            f"{canary}-input",
            id=workflow_id,
            task_queue=queue,
            memo={"note": f"{canary}-memo"},  # a memo is a payload: sealed like the others
        )
        await handle.signal(PayloadCanaryWorkflow.note, f"{canary}-signal")
        assert await handle.execute_update(PayloadCanaryWorkflow.amend, f"{canary}-update") == (
            f"{canary}-update-result"
        )
        assert await handle.query(PayloadCanaryWorkflow.peek, f"{canary}-query") == f"{canary}-query-result"
        assert await handle.result() == (
            f"{canary}-input-activity-input-activity-result / {canary}-signal / {canary}-update / "
            f"{canary}-input-child-child-result-workflow-result"
        )
        assert await (await handle.describe()).memo() == {"note": f"{canary}-memo"}
    return workflow_id


async def schedule_and_terminate(address: str, canary: str) -> None:
    """The canary in a paused schedule's action input and memo and its own memo, and in a run's
    termination details."""
    client = await Client.connect(address, namespace="default")
    queue = f"tq-{uuid.uuid4()}"
    schedule = await client.create_schedule(
        f"payload-schedule-{uuid.uuid4()}",
        Schedule(
            action=ScheduleActionStartWorkflow(
                PayloadCanaryWorkflow.run,
                f"{canary}-schedule-input",
                id=f"payload-scheduled-{uuid.uuid4()}",
                task_queue=queue,
                memo={"note": f"{canary}-scheduled-memo"},
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
            state=ScheduleState(paused=True),
        ),
        memo={"note": f"{canary}-schedule-memo"},
    )
    action = (await schedule.describe()).schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    assert await client.data_converter.decode(action.args) == [f"{canary}-schedule-input"]
    handle = await client.start_workflow(
        PayloadCanaryWorkflow.run,
        f"{canary}-terminated-input",
        id=f"payload-ended-{uuid.uuid4()}",
        task_queue=queue,
    )
    await handle.terminate(f"{canary}-terminate-details", reason="the canary test ends it")


async def exercise(running: servers.Running, canary: str) -> tuple[str, str]:
    """A kept run in `default`, and a run in a namespace kept 1 s that archives to S3, archived and deleted
    by retention: (kept id, archived id)."""
    archiving = f"arc-{uuid.uuid4().hex[:8]}"
    running.cli("namespace", "create", archiving)
    running.cli(
        "namespace",
        "update",
        archiving,
        "--retention",
        "1s",
        "--history-archival-state",
        "enabled",
        "--history-uri",
        f"s3://{BUCKET}/history",
        "--visibility-archival-state",
        "enabled",
        "--visibility-uri",
        f"s3://{BUCKET}/visibility",
    )
    kept = await run_one(running.address, "default", canary)
    await schedule_and_terminate(running.address, canary)
    archived = await run_one(running.address, archiving, canary)
    await wait_deleted(running, [archived])
    # A call that fails, whose line every log pipeline writes: the logs' positive control.
    client = await Client.connect(running.address, namespace="default")
    with pytest.raises(RPCError) as failed:
        await client.get_workflow_handle(f"missing-{uuid.uuid4()}").describe()
    assert failed.value.status == RPCStatusCode.NOT_FOUND
    return kept, archived


# The stores.


class Unreadable(Exception):
    """A store this machine does not let the test read (the WAL without root, a server log elsewhere)."""


def read_all(
    readers: dict[str, Callable[[], dict[str, bytes]]],
) -> tuple[dict[str, dict[str, bytes]], list[str]]:
    """Each store's contents, and why those that could not be read were not."""
    stores, unreadable = {}, []
    for name, read in readers.items():
        try:
            stores[name] = read()
        except Unreadable as e:
            unreadable.append(str(e))
    return stores, unreadable


def inflated(blob: bytes) -> bytes:
    """`blob`, followed by what every zlib or gzip stream in it inflates to: an archive compresses its
    batches before sealing them, so a batch left unsealed would be compressed, not clear."""
    found = [blob]
    for start in range(len(blob) - 1):
        if blob[start] not in (0x78, 0x1F):
            continue
        for wbits in (zlib.MAX_WBITS, 16 + zlib.MAX_WBITS):
            with contextlib.suppress(zlib.error):
                found.append(zlib.decompressobj(wbits).decompress(blob[start:], 1 << 24))
    return b"\n".join(found)


def s3_objects(store: S3) -> dict[str, bytes]:
    client = store.client()
    objects = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            body = client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
            objects[f"s3 {item['Key']}"] = item["Key"].encode() + b"\n" + inflated(body)
    return objects


def opensearch_documents(url: str, index: str) -> dict[str, bytes]:
    """Every document of the Perdura index, its raw `_source` as OpenSearch returns it."""
    request = urllib.request.Request(
        f"{url}/{index}/_search",
        data=json.dumps({"query": {"match_all": {}}, "size": 10000}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        hits = json.load(answer)["hits"]["hits"]
    return {f"opensearch {hit['_id']}": json.dumps(hit["_source"]).encode() for hit in hits}


def log_files(running: servers.Running) -> dict[str, bytes]:
    return {f"log {name}": path.read_bytes() for name, path in running.logs.items()}


def data_files(running: servers.Running) -> dict[str, bytes]:
    """Every file the server wrote under its data folder (logs, keys, the SQLite files in dev, anything
    added later)."""
    root = Path(running.env["PERDURA_DATA_DIR"])
    return {f"file {p.relative_to(root)}": p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def sqlite_files(running: servers.Running, when: str) -> dict[str, bytes]:
    assert running.db_file is not None
    files = sorted(running.db_file.parent.glob(running.db_file.name + "*"))
    return {f"sqlite {p.name} ({when})": p.read_bytes() for p in files}


def redis_keys(url: str) -> dict[str, bytes]:
    """Every key of the test's Redis database, each value read by its type (DUMP's RDB encoding compresses
    strings with LZF, which could hide a leak) and its DUMP besides."""
    client = redis.Redis.from_url(url)
    found = {}
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        if kind == "string":
            values = [client.get(key) or b""]
        elif kind == "hash":
            values = [b for pair in client.hgetall(key).items() for b in pair]
        elif kind == "list":
            values = client.lrange(key, 0, -1)
        elif kind == "set":
            values = list(client.smembers(key))
        elif kind == "zset":
            values = [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            values = [b for _, fields in client.xrange(key) for pair in fields.items() for b in pair]
        else:
            values = []
        dumped = client.dump(key) or b""
        found[f"redis {key!r}"] = b"\n".join([key, *values, dumped])
    return found


@contextlib.contextmanager
def redis_monitor(tmp: Path) -> Iterator[Path]:
    """`redis-cli monitor` while the block runs: every command sent to Redis (the channel layer's messages,
    Celery's task messages, keys since expired), written to a file."""
    out = tmp / "redis-monitor.txt"
    url = servers.REDIS_URL
    with out.open("wb") as sink:
        proc = subprocess.Popen(["redis-cli", "-u", url, "monitor"], stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while b"OK" not in out.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield out
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def wal_segments(database_url: str, since: float) -> dict[str, bytes]:
    """The cluster's WAL segments written since `since`, after a segment switch. No checkpoint first: one
    lets Postgres recycle the segments before it, and with other tests writing meanwhile the segment that
    held this test's rows was once recycled before it was read."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_switch_wal()")
        row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None
    wal = Path(row[0]) / "pg_wal"
    try:
        segments = [p for p in wal.iterdir() if p.is_file() and p.stat().st_mtime >= since]
        found = {f"wal {p.name}": p.read_bytes() for p in segments}
    except PermissionError as e:
        raise Unreadable(
            f"the Postgres WAL ({wal}) is not readable by this user: run as root or postgres"
        ) from e
    return found


def postgres_files(database_url: str) -> dict[str, bytes]:
    """The test database's own files in the cluster's data folder (tables, indexes, TOAST, free space),
    after a checkpoint wrote every page: dead row versions a dump leaves out are in them. A value over
    about 2 kB may be stored pglz-compressed there; the dump and the WAL's row images show it in clear."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute(
            "SELECT current_setting('data_directory'), oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    folder = Path(row[0]) / "base" / str(row[1])
    try:
        return {f"postgres file {p.name}": p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
    except PermissionError as e:
        raise Unreadable(f"the database's files ({folder}) are not readable by this user") from e


POSTGRES_LOGS = Path("/var/log/postgresql")


def postgres_log_sizes() -> dict[Path, int]:
    """The Postgres server's log files (Debian's layout) and their sizes now; empty if none is readable."""
    sizes = {}
    for path in sorted(POSTGRES_LOGS.glob("postgresql-*.log")):
        with contextlib.suppress(OSError):
            path.open("rb").close()
            sizes[path] = path.stat().st_size
    return sizes


def postgres_log(database_url: str, before: dict[Path, int], marker: str) -> dict[str, bytes]:
    """What the Postgres server logged since `before` (a failed statement's text is logged, and with it
    whatever values it spelled out), after a statement that fails on `marker`, the positive control."""
    if not before:
        raise Unreadable(f"no readable Postgres server log under {POSTGRES_LOGS}")
    with psycopg.connect(database_url) as conn, contextlib.suppress(psycopg.Error):
        conn.execute(f"SELECT '{marker}'::int")
    found = {}
    for path, size in before.items():
        with path.open("rb") as log:
            log.seek(size)
            found[f"postgres log {path.name}"] = log.read()
    return found


def pg_dump(database_url: str) -> dict[str, bytes]:
    dump = subprocess.run(["pg_dump", database_url], check=True, capture_output=True).stdout
    return {"pg_dump": dump}


# The checks, shared by both modes.


def check(
    canary: str, stores: dict[str, dict[str, bytes]], controls: dict[str, str], unreadable: list[str]
) -> None:
    """No store holds the canary in any form; each store holds its positive control (`controls`: store
    name -> a string it must hold somewhere, e.g. a workflow id). Stores this machine could not read
    skip the test once the others have passed, naming them."""
    for store, blobs in stores.items():
        assert blobs, f"nothing read from {store}"
        assert holding(blobs, controls[store]), f"{store} does not hold {controls[store]!r}: read wrong?"
    found = [leak for blobs in stores.values() for leak in leaks(blobs, canary)]
    assert not found, f"the canary {canary} leaked to: {found}"
    if unreadable:
        pytest.skip(f"every other store was checked; not checked: {'; '.join(unreadable)}")


@pytest.fixture
def s3_store() -> Iterator[S3]:
    with moto_s3() as store:
        store.client().create_bucket(Bucket=BUCKET)
        yield store


@pytest.fixture
def opensearch_env() -> Iterator[tuple[str, str, dict[str, str]]]:
    """(OpenSearch URL, index, the server environment that makes it the visibility store)."""
    with opensearch.opensearch_url() as url:
        index = opensearch.index_name()
        yield (
            url,
            index,
            {
                "PERDURA_VISIBILITY": "opensearch",
                "PERDURA_OPENSEARCH_URL": url,
                "PERDURA_OPENSEARCH_INDEX": index,
                "PERDURA_OPENSEARCH_REPLICAS": "0",
            },
        )
        opensearch.drop_index(url, index)


async def test_production_stores_hold_no_payload_in_clear(tmp_path, s3_store, opensearch_env):
    canary = f"canary-{secrets.token_hex(8)}"
    os_url, index, os_env = opensearch_env
    env = {**SERVER_ENV, **s3_store.env, **os_env, "PERDURA_LOG_FORMAT": "json"}
    since = time.time() - 1
    postgres_logs = postgres_log_sizes()
    marker = f"control-{uuid.uuid4()}"
    (tmp_path / "server").mkdir()
    with (
        servers.postgres_database(schema=True) as url,
        redis_monitor(tmp_path) as monitor,
        servers.production(tmp_path / "server", url, env=env) as running,
    ):
        kept, archived = await exercise(running, canary)
        running.stop()  # every line logged, every write done
        stores, unreadable = read_all(
            {
                "pg_dump": lambda: pg_dump(url),
                "wal": lambda: wal_segments(url, since),
                "postgres files": lambda: postgres_files(url),
                "postgres log": lambda: postgres_log(url, postgres_logs, marker),
                "redis": lambda: redis_keys(servers.REDIS_URL),
                "opensearch": lambda: opensearch_documents(os_url, index),
                "s3": lambda: s3_objects(s3_store),
                "logs": lambda: log_files(running),
                "data folder": lambda: data_files(running),
            }
        )
    stores["redis monitor"] = {"redis monitor": monitor.read_bytes()}
    check(
        canary,
        stores,
        {
            "pg_dump": kept,
            "wal": kept,
            "postgres files": kept,
            "postgres log": marker,  # the statement that failed on purpose
            # Celery's queue, named per server: the task messages went through this Redis.
            "redis": running.env["PERDURA_CELERY_QUEUE"],
            "redis monitor": running.env["PERDURA_CELERY_QUEUE"],
            "opensearch": kept,
            "s3": archived,
            "logs": "DescribeWorkflowExecution",  # the failed call's line
            "data folder": "DescribeWorkflowExecution",
        },
        unreadable,
    )


async def test_dev_stores_hold_no_payload_in_clear(tmp_path, s3_store):
    """`perdura dev` keeps its visibility in SQL (the memo in the SQLite file), production in OpenSearch."""
    canary = f"canary-{secrets.token_hex(8)}"
    env = {**SERVER_ENV, **s3_store.env, "PERDURA_LOG_FORMAT": "json"}
    (tmp_path / "server").mkdir()
    with servers.dev_server(tmp_path / "server", env=env) as running:
        kept, archived = await exercise(running, canary)
        live = sqlite_files(running, "running")
        running.stop()
        stores = {
            "sqlite": {**live, **sqlite_files(running, "stopped")},
            "s3": s3_objects(s3_store),
            "logs": log_files(running),
            "data folder": data_files(running),
        }
    check(
        canary,
        stores,
        {
            "sqlite": kept,
            "s3": archived,
            "logs": "DescribeWorkflowExecution",
            "data folder": kept,  # the SQLite file is there
        },
        [],
    )
