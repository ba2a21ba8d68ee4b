"""DBOS's one-step workflow on a Postgres, in-process: the figure issue 17 asks Perdura's production mode
to be reported beside.

DBOS (https://docs.dbos.dev) is a library, not a server: a workflow runs in the calling process and
checkpoints itself in its system database. This runs `--workflows` workflows of one step (an echo, as
bench/throughput.py's one_activity) from `--concurrency` threads and reports workflows/s, end-to-end p50 /
p99, and CPU per workflow of this process and of the Postgres server (the postmaster and its backends;
keep it otherwise quiet). Nothing else in Perdura uses DBOS: install it in a virtualenv of its own,

    python3 -m venv /tmp/dbos-venv && /tmp/dbos-venv/bin/pip install dbos psycopg
    /tmp/dbos-venv/bin/python bench/dbos_one_step.py --database-url postgresql://postgres@127.0.0.1:5432/dbos_bench

(the database is created if missing, and its DBOS tables by DBOS itself).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
from dbos import DBOS, DBOSConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import percentile, process_tree_cpu_s  # noqa: E402


@DBOS.step()
def echo(value: str) -> str:
    return value


@DBOS.workflow()
def one_step(value: str) -> str:
    return echo(value)


def ensure_database(url: str) -> int:
    """Create the database if missing; the Postgres postmaster's pid."""
    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
        (data_dir,) = conn.execute("SHOW data_directory").fetchone() or ("",)
    return int(Path(data_dir, "postmaster.pid").read_text().split()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--workflows", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    postmaster = ensure_database(args.database_url)
    config: DBOSConfig = {"name": "perdura-bench", "system_database_url": args.database_url}
    DBOS(config=config)
    DBOS.launch()
    latencies: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        began = time.perf_counter()
        assert one_step(f"bench-{i}") == f"bench-{i}"
        with lock:
            latencies.append((time.perf_counter() - began) * 1000)

    with ThreadPoolExecutor(args.concurrency) as pool:
        list(pool.map(one, range(args.warmup)))
        latencies.clear()
        cpu, pg = time.process_time(), process_tree_cpu_s([postmaster])
        began = time.perf_counter()
        list(pool.map(one, range(args.warmup, args.warmup + args.workflows)))
        wall = time.perf_counter() - began
        cpu, pg = time.process_time() - cpu, process_tree_cpu_s([postmaster]) - pg
    ordered = sorted(latencies)
    result = {
        "workflows": args.workflows,
        "concurrency": args.concurrency,
        "workflows_per_s": round(args.workflows / wall, 1),
        "e2e_ms": {"p50": round(statistics.median(ordered), 2), "p99": round(percentile(ordered, 99), 2)},
        "process_cpu_ms_per_wf": round(cpu * 1000 / args.workflows, 2),
        "postgres_cpu_ms_per_wf": round(pg * 1000 / args.workflows, 2),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    sys.stdout.flush()
    os._exit(0)  # DBOS's background threads would keep the process alive


if __name__ == "__main__":
    main()
