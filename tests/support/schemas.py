"""Migrated, empty schemas, made once per state of the migrations and copied for each server the tests start.

Migrating a new database from nothing takes about 5 s (Postgres) and 3 s more than a no-op migrate
(SQLite), and the suite starts dozens of servers. A copy is a file copy (SQLite) or a `CREATE DATABASE
... TEMPLATE` (Postgres, about 0.5 s). The copies hold the schema only, no row: `perdura migrate` and
`perdura dev` still run their migrate (a no-op) and make the `default` namespace with the server's own
master key. Tests of migrating itself ask for an empty database instead (`postgres_database()`).

The templates are named by a fingerprint of everything that shapes the schema (the migrations, Django's
and django-guardian's versions, this file), so every test process of a `make test` (five: three workers,
then two) and the runs after it share one of each, made by the first to need it under a lock; a template
of another fingerprint is dropped when a new one is made.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
APPS = ("engine", "tenants", "visibility", "frontend")
_lock = threading.Lock()
_sqlite_file: Path | None = None
_postgres_template: str | None = None


def fingerprint() -> str:
    """A name for the schema the migrations make: it changes when any of them, or what runs them, does."""
    digest = hashlib.sha256()
    for package in ("django", "django-guardian"):
        digest.update(f"{package}={importlib.metadata.version(package)}\n".encode())
    digest.update(Path(__file__).read_bytes())
    for app in APPS:
        for path in sorted((ROOT / app / "migrations").glob("*.py")):
            digest.update(f"{app}/{path.name}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _migrate(database_url: str) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PERDURA_") and k != "DJANGO_SETTINGS_MODULE"
    }
    env["PERDURA_DATABASE_URL"] = database_url
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--verbosity", "0"],
        env=env,
        check=True,
        capture_output=True,
        cwd=ROOT,
    )


def copy_sqlite(destination: Path) -> None:
    """Write a migrated, empty SQLite database at `destination`."""
    global _sqlite_file
    for _ in range(2):
        with _lock:
            if _sqlite_file is None:
                _sqlite_file = _sqlite_template()
            template = _sqlite_file
        try:
            shutil.copyfile(template, destination)
            return
        except FileNotFoundError:
            forget()  # a run of other migrations replaced it meanwhile: make ours again
    raise RuntimeError(f"the schema template {template} keeps disappearing")


def forget() -> None:
    """Look for (or make) the templates again: another checkout's run replaced them."""
    global _sqlite_file, _postgres_template
    with _lock:
        _sqlite_file = _postgres_template = None


def _sqlite_template() -> Path:
    folder = Path(tempfile.gettempdir())
    path = folder / f"perdura-schema-{fingerprint()}.sqlite3"
    with (folder / "perdura-schema.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process migrates; the others wait, then copy its file
        if not path.exists():
            for stale in folder.glob("perdura-schema-*.sqlite3"):
                stale.unlink(missing_ok=True)
            work = folder / f"perdura-schema-{uuid.uuid4().hex}.partial"
            try:
                _migrate(f"sqlite:///{work}")
                # Out of WAL mode, so the one file holds everything (the server turns WAL back on).
                with contextlib.closing(sqlite3.connect(work)) as conn:
                    conn.execute("PRAGMA journal_mode=DELETE")
                os.replace(work, path)
            finally:
                work.unlink(missing_ok=True)
    return path


def postgres_template(admin_url: str) -> str:
    """The name of a migrated, empty database on the server of `admin_url`, to copy."""
    global _postgres_template
    with _lock:
        if _postgres_template is None:
            _postgres_template = _postgres_template_made(admin_url)
        return _postgres_template


def _postgres_template_made(admin_url: str) -> str:
    name = f"perdura_schema_{fingerprint()}"
    base, _, _ = admin_url.rpartition("/")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        # One process migrates; the others wait on the lock, then find the template made.
        conn.execute("SELECT pg_advisory_lock(hashtext('perdura test schema template'))")
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return name
        stale = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'perdura\\_schema\\_%%'"
        ).fetchall()
        for (old,) in stale:
            # Without FORCE: a run still copying it (another checkout) keeps it.
            with contextlib.suppress(psycopg.Error):
                conn.execute(f'DROP DATABASE IF EXISTS "{old}"')
        work = f"{name}_{uuid.uuid4().hex[:8]}"
        conn.execute(f'CREATE DATABASE "{work}"')
        try:
            _migrate(f"{base}/{work}")
        except BaseException:
            conn.execute(f'DROP DATABASE IF EXISTS "{work}" WITH (FORCE)')
            raise
        conn.execute(f'ALTER DATABASE "{work}" RENAME TO "{name}"')
    return name
