"""Private Postgres and Redis instances that a chaos test may stop, kill and restart.

The machine's own Postgres (5432) and Redis (6379) are shared by everyone on it and must never be
stopped; these run from a temp directory on a free port, with trust auth and no persistence
settings beyond the defaults, and are torn down afterwards.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis

from tests.support.servers import free_port


def _pg_bin() -> Path:
    """The newest installed server binaries (Debian/Ubuntu keep them per major version)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()


def _as_postgres_user() -> list[str]:
    """initdb and postgres refuse to run as root: as root, run them as the `postgres` account."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@dataclass
class PrivatePostgres:
    """A Postgres cluster of our own: `stop_immediate` is `pg_ctl stop -m immediate` (a crash)."""

    data: Path
    port: int
    log: Path

    @property
    def admin_url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            [*_as_postgres_user(), str(PG_BIN / "pg_ctl"), "-D", str(self.data), *args],
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        # The socket goes to /tmp (a tmp_path can exceed the 107-byte limit of a socket path); the port
        # is ours alone, so the name cannot collide.
        options = f"-p {self.port} -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=200"
        self._ctl("start", "-w", "-t", "60", "-l", str(self.log), "-o", options)

    def stop_immediate(self) -> None:
        """No checkpoint, no goodbye to clients: every connection breaks mid-transaction, as in a crash."""
        self._ctl("stop", "-m", "immediate", "-w")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._ctl("stop", "-m", "fast", "-w")

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A fresh cluster in a directory of its own under /tmp (not under pytest's tmp_path, which only
    root may enter when the tests run as root and the cluster runs as `postgres`)."""
    if not (PG_BIN / "initdb").exists():
        raise RuntimeError(f"no Postgres server binaries (initdb, pg_ctl) in {PG_BIN} for a private cluster")
    home = Path(tempfile.mkdtemp(prefix="perdura-chaos-pg-"))
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(home, account.pw_uid, account.pw_gid)
    data = home / "data"
    subprocess.run(
        [*_as_postgres_user(), str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        + ["-E", "UTF8", "--no-sync"],
        check=True,
        capture_output=True,
    )
    # A test cluster: durability across an OS crash is not what is tested (a crash of Postgres is,
    # which fsync does not change), so skip the fsyncs that would make every commit wait on a shared disk.
    with (data / "postgresql.conf").open("a") as conf:
        conf.write("fsync = off\nfull_page_writes = off\n")
    pg = PrivatePostgres(data=data, port=free_port(), log=home / "postgres.log")
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(home, ignore_errors=True)


@dataclass
class PrivateRedis:
    """A redis-server of our own, without persistence: a restart loses every queued message."""

    dir: Path
    port: int
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = (self.dir / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ]
            + ["--daemonize", "no", "--dir", str(self.dir)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                redis.Redis.from_url(self.url, socket_timeout=0.5).ping()
                return
            except redis.RedisError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"private redis-server did not start on {self.port}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """kill -9: everything in memory (queued wake-ups, unacked messages) is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def private_redis(tmp: Path) -> Iterator[PrivateRedis]:
    directory = tmp / "redis"
    directory.mkdir(exist_ok=True)
    server = PrivateRedis(dir=directory, port=free_port())
    server.start()
    try:
        yield server
    finally:
        server.kill()
