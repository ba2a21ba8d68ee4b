"""visibility 0003 (slot columns) migrates existing data forward, on Postgres and on SQLite.

A fresh database is migrated, taken back to visibility 0002 (so 0003 also reverses cleanly), given
attributes and records as 0002 stored them, then migrated forward again: each scalar attribute gets
its slot in registration order and the slot columns hold the records' values of the right type.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support import servers

ATTRIBUTES = [("K1", 2), ("I1", 3), ("T1", 1), ("D1", 4), ("B1", 5), ("W1", 6), ("L1", 7), ("K2", 2)]
WHEN = 1_767_225_600_000_000
RECORDS = {
    1: {"K1": "a", "I1": 5, "D1": 1.5, "B1": True, "W1": WHEN, "T1": "hello world", "L1": ["x"], "K2": "b"},
    # Values of another type than the attribute's (left from an earlier registration) fill nothing.
    2: {"K1": 7, "I1": 2.5, "D1": 3, "B1": False, "W1": "2026-01-01T00:00:00Z"},
    3: {},
}
SLOT_COLUMNS = ["keyword01", "keyword02", "int01", "double01", "bool01", "datetime01"]


class Database:
    """A fresh database of one vendor, and plain SQL on it."""

    def __init__(self, url: str, vendor: str) -> None:
        self.url = url
        self.vendor = vendor

    def _connect(self):
        if self.vendor == "sqlite":
            return sqlite3.connect(self.url.removeprefix("sqlite:///"))
        return psycopg.connect(self.url)

    def run(self, statement: str, params: list[object] | None = None) -> list[tuple[object, ...]]:
        """Execute one statement in its own transaction; the rows it returns."""
        if self.vendor == "sqlite":
            statement = statement.replace("%s", "?")
        conn = self._connect()
        try:
            cursor = conn.execute(statement, params or [])
            rows = cursor.fetchall() if cursor.description else []
            conn.commit()
            return rows
        finally:
            conn.close()


@pytest.fixture(params=["postgres", "sqlite"])
def database(request, tmp_path) -> Iterator[Database]:
    if request.param == "sqlite":
        yield Database(f"sqlite:///{tmp_path / 'perdura.sqlite3'}", "sqlite")
        return
    with servers.postgres_database() as url:
        yield Database(url, "postgres")


def _manage(database: Database, tmp: Path, *args: str) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PERDURA_") and k != "DJANGO_SETTINGS_MODULE"
    }
    env.update(
        PERDURA_DATABASE_URL=database.url,
        PERDURA_MASTER_KEY=base64.b64encode(b"visibility-migration-test-key-32").decode(),
        PERDURA_DATA_DIR=str(tmp),
    )
    if args == ("perdura",):  # the whole schema and the default namespace, as an installation has them
        command = [str(Path(sys.executable).parent / "perdura"), "migrate"]
    else:
        command = [sys.executable, "manage.py", *args]
    done = subprocess.run(command, env=env, cwd=servers.ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


def test_slots_are_assigned_and_filled_from_the_json_documents(database, tmp_path) -> None:
    _manage(database, tmp_path, "perdura")
    _manage(database, tmp_path, "migrate", "visibility", "0002")
    namespace = database.run("SELECT id FROM tenants_namespace WHERE name = 'default'")[0][0]
    for name, t in ATTRIBUTES:
        database.run(
            "INSERT INTO visibility_customsearchattribute (namespace_id, name, type) VALUES (%s, %s, %s)",
            [namespace, name, t],
        )
    start = "2026-01-01 00:00:00+00:00"
    for pk, custom in RECORDS.items():
        database.run(
            "INSERT INTO engine_execution (id, namespace_id, workflow_id, run_id, shard, workflow_type, task_queue, "
            "status, start_time, execution_time, close_time, next_event_id, db_version, state) "
            "VALUES (%s, %s, %s, %s, 0, 'T', 'q', 1, %s, %s, NULL, 2, 1, %s)",
            [pk, namespace, f"w{pk}", f"r{pk}", start, start, b""],
        )
        database.run(
            "INSERT INTO visibility_visibilityrecord (execution_id, namespace_id, workflow_id, run_id, workflow_type, "
            "task_queue, status, start_time, execution_time, close_time, close_sort, execution_duration, "
            "history_length, history_size_bytes, state_transition_count, parent_workflow_id, parent_run_id, "
            "root_workflow_id, root_run_id, first_run_id, memo, search_attributes, custom) VALUES (%s, %s, %s, %s, "
            "'T', 'q', 1, %s, %s, NULL, %s, NULL, 1, 0, 0, NULL, NULL, %s, %s, '', %s, %s, %s)",
            [
                pk,
                namespace,
                f"w{pk}",
                f"r{pk}",
                WHEN,
                WHEN,
                2**63 - 1,
                f"w{pk}",
                f"r{pk}",
                b"",
                b"",
                json.dumps(custom),
            ],
        )

    _manage(database, tmp_path, "migrate", "visibility")

    slots = dict(database.run("SELECT name, slot FROM visibility_customsearchattribute ORDER BY id"))
    assert slots == {
        "K1": "keyword01",
        "I1": "int01",
        "T1": None,
        "D1": "double01",
        "B1": "bool01",
        "W1": "datetime01",
        "L1": None,
        "K2": "keyword02",
    }
    rows = database.run(
        f"SELECT execution_id, {', '.join(SLOT_COLUMNS)} FROM visibility_visibilityrecord ORDER BY execution_id"
    )
    got = {row[0]: dict(zip(SLOT_COLUMNS, row[1:], strict=True)) for row in rows}
    assert got == {
        1: {
            "keyword01": "a",
            "keyword02": "b",
            "int01": 5,
            "double01": 1.5,
            "bool01": True,
            "datetime01": WHEN,
        },
        2: {
            "keyword01": None,
            "keyword02": None,
            "int01": None,
            "double01": 3.0,
            "bool01": False,
            "datetime01": None,
        },
        3: dict.fromkeys(SLOT_COLUMNS),
    }
    if database.vendor == "postgres":
        indexes = database.run("SELECT indexdef FROM pg_indexes WHERE indexname = 'vis_slot_keyword01'")
        assert "WHERE (keyword01 IS NOT NULL)" in str(indexes[0][0])
        collation = database.run(
            "SELECT collation_name FROM information_schema.columns "
            "WHERE table_name = 'visibility_visibilityrecord' AND column_name = 'keyword01'"
        )
        assert collation == [("C",)]
    else:
        indexes = database.run("SELECT sql FROM sqlite_master WHERE name = 'vis_slot_keyword01'")
        assert 'WHERE "keyword01" IS NOT NULL' in str(indexes[0][0])
