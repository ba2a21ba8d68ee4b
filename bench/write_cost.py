"""What one workflow costs Postgres in commits and rows written, counted by Postgres itself.

Starts the production processes of its own on a fresh database, runs bench/throughput.py against them
(`--workflows` at `--concurrency`, after its warm-up ones), and reads Postgres's own counters for that
database before and after: committed transactions (`pg_stat_database.xact_commit`) and, per table, rows
inserted, updated and deleted (`pg_stat_user_tables`). It divides by every workflow run, warm-up
included. Postgres counts a statement run outside a transaction (autocommit: most reads) as a committed
transaction too, so the commits here are more than the COMMITs of the writes. Rows written on a clock rather than per workflow (the shard loops' lease renewals and
heartbeats, beat's sweep) are counted during `--idle` seconds without load first and taken off, in
proportion to the time the load took.

Perdura-specific (it reads its tables), so it imports the test support that starts servers.

Usage::

    python bench/write_cost.py [--scenario one_activity] [--workflows 200] [--concurrency 32] [--idle 10]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from measure import throughput_command  # noqa: E402

from tests.support import servers  # noqa: E402

WARMUP = 5  # bench/throughput.py's default
STATS_FLUSH_SECONDS = 11.0


def counters(database_url: str) -> dict[str, float]:
    """Postgres's counters for the database: commits, and per table rows inserted / updated / deleted."""
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url, autocommit=True) as conn:
        # A busy backend hands its counters to the shared statistics at a transaction's end at most once a
        # second, an idle one after PGSTAT_IDLE_INTERVAL (10 s).
        time.sleep(STATS_FLUSH_SECONDS)
        conn.execute("SELECT pg_stat_clear_snapshot()")
        (commits,) = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [name]
        ).fetchone() or (0,)
        found = {"commits": float(commits)}
        for table, ins, upd, dele in conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"
        ):
            for kind, value in (("insert", ins), ("update", upd), ("delete", dele)):
                if value:
                    found[f"{table} {kind}"] = float(value)
    return found


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenario", default="one_activity")
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of no load to count first")
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perdura-writes-") as name, contextlib.ExitStack() as stack:
        url = stack.enter_context(servers.postgres_database())
        running = stack.enter_context(servers.production(Path(name), url, env={"PERDURA_SHARD_LOOPS": "16"}))
        start = counters(url)
        time.sleep(args.idle)
        idle_end = counters(url)
        idle = delta(idle_end, start)
        idle_seconds = args.idle + STATS_FLUSH_SECONDS  # and the counters' own wait
        began = time.monotonic()
        subprocess.run(
            throughput_command(
                running.address, args.scenario, args.workflows, args.concurrency, "--warmup", str(WARMUP)
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
        )
        loaded = delta(counters(url), idle_end)
        load_seconds = time.monotonic() - began
    runs = args.workflows + WARMUP
    scale = load_seconds / idle_seconds
    per_workflow = {
        k: round(max(v - idle.get(k, 0.0) * scale, 0.0) / runs, 2) for k, v in sorted(loaded.items())
    }
    per_workflow = {k: v for k, v in per_workflow.items() if v}
    rows = round(sum(v for k, v in per_workflow.items() if k != "commits"), 2)
    result = {
        "scenario": args.scenario,
        "workflows": runs,
        "load_seconds": round(load_seconds, 1),
        "per_workflow": per_workflow,
        "rows_written_per_workflow": rows,
        "on_a_clock_per_second": {k: round(v / idle_seconds, 2) for k, v in sorted(idle.items())},
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
