"""Start Perdura for tests as a user would: `perdura dev` on SQLite, or the production processes on Postgres."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from tests.support import schemas, warm_cli

ROOT = Path(__file__).resolve().parents[2]
PERDURA = str(Path(sys.executable).parent / "perdura")
PG_CANDIDATES = [
    os.environ.get("PERDURA_TEST_DATABASE_URL", ""),
    "postgres://postgres@127.0.0.1:5432/postgres",
    "postgres://perdura:perdura@127.0.0.1:5432/postgres",
]
# Each pytest-xdist worker (gw0, gw1, ...) its own Redis database, so one worker's servers never share
# rate-limit buckets, hints or channel groups with another's.
_XDIST_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
REDIS_URL = os.environ.get("PERDURA_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{13 - _XDIST_WORKER}")


_handed_out: set[int] = set()


def free_port() -> int:
    """A port nobody listens on now, and never one this process handed out before: the kernel can give the
    same free port to two calls in a row, and a `perdura dev` then got it for gRPC and its web server both
    (the web server failed to bind, and a session's browser tests met gRPC instead)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"server did not listen on {port} within {timeout}s:\n{log.read_text()[-4000:]}")


def wait_for_log(
    needle: str, proc: subprocess.Popen, log: Path, timeout: float = 60, *, pattern: str | None = None
) -> None:
    """Wait until `needle` (and `pattern`, a regular expression, if given) shows in the process's log (e.g.
    a Celery worker's "ready.")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        text = log.read_text(errors="replace") if log.exists() else ""
        if needle in text and (pattern is None or re.search(pattern, text)):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{needle!r} did not show in {log} within {timeout}s:\n{log.read_text()[-4000:]}")


class WarmCli:
    """A warm `perdura` (tests/support/warm_cli.py) for one environment: `run` sends it a command."""

    def __init__(self, key: tuple, env: dict[str, str]) -> None:
        self.key = key
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [sys.executable, warm_cli.__file__],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        with self._lock:
            assert self._proc.stdin is not None
            assert self._proc.stdout is not None
            try:
                self._proc.stdin.write(json.dumps(argv) + "\n")
                self._proc.stdin.flush()
                line = self._proc.stdout.readline()
            except BrokenPipeError:
                line = ""
            if not line:
                self._proc.wait()
                assert self._proc.stderr is not None
                raise RuntimeError(
                    f"the warm perdura exited with {self._proc.returncode}:\n{self._proc.stderr.read()}"
                )
        answer = json.loads(line)
        return answer["returncode"], answer["stdout"], answer["stderr"]

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


@dataclass
class Running:
    """A running Perdura: its gRPC address and the processes behind it."""

    address: str
    env: dict[str, str]
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    database_url: str = ""
    replicas: dict[str, str] = field(default_factory=dict)
    """Extra `perdura api` processes by name: their addresses (see `replica`)."""
    db_file: Path | None = None
    """The SQLite file of `perdura dev`."""
    metrics_ports: dict[str, int] = field(default_factory=dict)
    """Each process's metrics port by process name (`perdura dev`, `api`, `worker`, replicas): every server
    of the suite gets free ones, never the shared default."""
    _warm_cli: WarmCli | None = field(default=None, repr=False)

    def stop(self) -> None:
        if self._warm_cli is not None:
            self._warm_cli.close()
            self._warm_cli = None
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def replica(self, name: str = "api-2") -> str:
        """Another `perdura api` on the same database and Redis (production only): its address.

        Started once per name and stopped with the rest, so a test can send a call to one replica and
        poll on another, as a load balancer would.
        """
        if not self.database_url:
            raise RuntimeError("replicas share a Postgres database: production mode only")
        if name not in self.replicas:
            port = free_port()
            proc = self.spawn(
                name,
                [
                    "api",
                    "--ip",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--db-threads",
                    str(TEST_DB_THREADS),
                    *self.metrics_flag(name),
                ],
            )
            wait_for_port(port, proc, self.logs[name])
            self.replicas[name] = f"127.0.0.1:{port}"
        return self.replicas[name]

    def cli(self, *args: str) -> str:
        """Run a `perdura` operator command (org, namespace, apikey) against this server's database;
        its standard output. The operator commands run in a fork of a warm `perdura` kept for this
        server and its environment (tests/support/warm_cli.py); the others in a process of their own."""
        env = dict(self.env, PERDURA_DATABASE_URL=self.database_url or f"sqlite:///{self.db_file}")
        if args and args[0] in warm_cli.COMMANDS:
            returncode, stdout, stderr = self._warm(env).run(list(args))
        else:
            done = subprocess.run([PERDURA, *args], env=env, capture_output=True, text=True, cwd=ROOT)
            returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
        if returncode != 0:
            raise RuntimeError(f"perdura {' '.join(args)} failed:\n{stderr}")
        return stdout

    def _warm(self, env: dict[str, str]) -> WarmCli:
        key = tuple(sorted(env.items()))
        if self._warm_cli is None or self._warm_cli.key != key:
            if self._warm_cli is not None:
                self._warm_cli.close()
            self._warm_cli = WarmCli(key, env)
        return self._warm_cli

    def kill(self, name: str) -> None:
        """kill -9 one process and everything it started, as a crashed host or container would lose them
        (`perdura worker` is a supervisor whose Celery worker and pool are its children)."""
        proc = self.processes[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def metrics_flag(self, name: str) -> list[str]:
        """`--metrics-port P` with a free port for process `name`, noted in `metrics_ports`."""
        self.metrics_ports[name] = free_port()
        return ["--metrics-port", str(self.metrics_ports[name])]

    def spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = self.logs.setdefault(name, Path(self.env["PERDURA_DATA_DIR"]) / f"{name}.log")
        # A session of its own: `kill` reaches the process's children too.
        proc = subprocess.Popen(
            [PERDURA, *args],
            env=self.env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
        self.processes[name] = proc
        return proc


def _base_env(tmp: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PERDURA_") and k != "DJANGO_SETTINGS_MODULE"
    }
    env["PERDURA_DATA_DIR"] = str(tmp)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@contextlib.contextmanager
def dev_server(
    tmp: Path,
    *,
    db_file: Path | None = None,
    port: int | None = None,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Iterator[Running]:
    """`perdura dev` on a SQLite file of its own (`extra`: more arguments, e.g. `--require-auth`;
    `env`: more environment, e.g. PERDURA_VISIBILITY)."""
    port = port or free_port()
    env = {**_base_env(tmp), **(env or {})}
    db = db_file or tmp / "perdura.sqlite3"
    if db_file is None and not db.exists():
        schemas.copy_sqlite(db)
    running = Running(address=f"127.0.0.1:{port}", env=env, db_file=db)
    args = ["dev", "--port", str(port), "--ui-port", "0", "--db-file", str(db), *running.metrics_flag("dev")]
    proc = running.spawn("dev", [*args, *extra])
    try:
        wait_for_port(port, proc, running.logs["dev"])
        yield running
    finally:
        running.stop()


def postgres_admin_url() -> str:
    """The first Postgres URL that accepts a connection (trust auth on CI; a password role elsewhere)."""
    errors = []
    for url in filter(None, PG_CANDIDATES):
        try:
            with psycopg.connect(url, connect_timeout=3):
                return url
        except psycopg.Error as e:
            errors.append(f"{url}: {e}")
    raise RuntimeError("no Postgres to test against (set PERDURA_TEST_DATABASE_URL):\n" + "\n".join(errors))


@contextlib.contextmanager
def postgres_database(*, schema: bool = False) -> Iterator[str]:
    """A fresh database for one test session, dropped afterwards: empty, or with `schema` migrated and
    no row (a copy of tests/support/schemas.py's template: seconds faster than migrating)."""
    admin = postgres_admin_url()
    name = f"perdura_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        try:
            template = f' TEMPLATE "{schemas.postgres_template(admin)}"' if schema else ""
            conn.execute(f'CREATE DATABASE "{name}"{template}')
        except psycopg.errors.InvalidCatalogName:
            schemas.forget()  # a run of other migrations replaced the template meanwhile: make ours again
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{schemas.postgres_template(admin)}"')
    base, _, _ = admin.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


TEST_DB_THREADS = 4


@contextlib.contextmanager
def production(
    tmp: Path,
    database_url: str,
    *,
    redis_url: str = REDIS_URL,
    env: dict[str, str] | None = None,
    api_args: tuple[str, ...] = (),
) -> Iterator[Running]:
    """The production processes: `perdura api` (gRPC), a Celery shard worker and beat, on Postgres + Redis
    (`redis_url`: another Redis, e.g. a private one a chaos test restarts; `env`: more environment;
    `api_args`: more arguments of `perdura api`, e.g. `--processes 2`)."""
    port = free_port()
    extra = env or {}
    env = _base_env(tmp)
    env.update(
        PERDURA_DATABASE_URL=database_url,
        PERDURA_REDIS_URL=redis_url,
        PERDURA_MASTER_KEY=base64.b64encode(os.urandom(32)).decode(),
        PERDURA_CELERY_QUEUE=f"perdura-test-{uuid.uuid4().hex[:8]}",
        PERDURA_SWEEP_SECONDS="1",
        # The suite's clients connect from loopback without a key, as they do to `perdura dev`; calls that
        # carry a key are checked all the same (tests/e2e/test_auth.py).
        PERDURA_AUTH="loopback",
        # Two shard loops, not the default four: each keeps a connection (see TEST_DB_THREADS).
        PERDURA_SHARD_LOOPS="2",
    )
    env.update(extra)
    running = Running(address=f"127.0.0.1:{port}", env=env, database_url=database_url)
    subprocess.run([PERDURA, "migrate"], env=env, check=True, capture_output=True, cwd=ROOT)
    try:
        # Four database threads, not the default 16: each keeps its connection, and three xdist workers'
        # production servers at once went over Postgres's 100 connections ("too many clients already").
        api_command = [
            "api",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--db-threads",
            str(TEST_DB_THREADS),
            *running.metrics_flag("api"),
        ]
        api = running.spawn("api", [*api_command, *api_args])
        worker = running.spawn("worker", ["worker", "--concurrency", "2", *running.metrics_flag("worker")])
        running.spawn("beat", ["beat"])
        wait_for_port(port, api, running.logs["api"])
        # Until the worker has joined its queue, timers and transfers wait on their hints: a test that
        # starts at once would measure the worker's start-up (about a second) as lateness.
        wait_for_log(" ready.", worker, running.logs["worker"])
        # Until the shard loop holds its shards, timers wait for beat's sweep (engine/tasks.py).
        wait_for_log("shards", worker, running.logs["worker"], pattern=r"holds [1-9]\d* of")
        yield running
    finally:
        running.stop()
