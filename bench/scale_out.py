"""Scale out: do two `perdura api` processes and two `perdura worker`s carry at least what one of each does?

Starts the production processes of its own on a fresh Postgres database, in two layouts, alternating
over `--rounds` (a fresh database and processes for each run):

* `1+1`: one `perdura api`, one `perdura worker` (and beat);
* `2+2`: a second `perdura api` on the same database and Redis, and a second worker; its shard loops
  share the shards with the first's.

In both, the same load: `--clients` processes of bench/throughput.py, each with its own SDK worker and
task queue, `--workflows` workflows each at `--concurrency`, all at once; in `1+1` they all call the one
api, in `2+2` they take turns over the two (as a load balancer would). It reports the workflows/s of the
clients together, their end-to-end p50 / p99, and the CPU per workflow of the server's processes (the
apis, the workers with their loops and Celery pools, beat) and of Postgres (the postmaster and all its
backends: keep the machine's Postgres otherwise quiet).

Then, in `2+2`, it stops the second worker (SIGTERM) and times how long until the first one's loops
hold every shard.

Perdura-specific (it starts servers), so it imports the test support that does.

Usage::

    python bench/scale_out.py [--scenario one_activity] [--clients 2] [--workflows 200] [--concurrency 16]
        [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from measure import process_tree_cpu_s, throughput_command  # noqa: E402

from tests.support import servers  # noqa: E402

SHARDS = 16


def postmaster_pid() -> int:
    """The Postgres server's main process (its backends are its children)."""
    with psycopg.connect(servers.postgres_admin_url()) as conn:
        (data_dir,) = conn.execute("SHOW data_directory").fetchone() or ("",)
    return int(Path(data_dir, "postmaster.pid").read_text().split()[0])


def owned_by(database_url: str, supervisor_pid: int) -> int:
    """How many shards the loops of the worker whose supervisor is `supervisor_pid` hold now."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM engine_shardlease WHERE owner LIKE %s AND expires_at > now()",
            [f"%:{supervisor_pid}:worker/%"],
        ).fetchone()
    return int(row[0]) if row else 0


def start_layout(stack: contextlib.ExitStack, tmp: Path, width: int) -> tuple[list[str], servers.Running]:
    url = stack.enter_context(servers.postgres_database())
    # The product's default loops, not the suite's two (which counts every connection).
    running = stack.enter_context(servers.production(tmp, url, env={"PERDURA_SHARD_LOOPS": "16"}))
    addresses = [running.address]
    if width == 2:
        addresses.append(running.replica("api-2"))
        worker = running.spawn(
            "worker-2", ["worker", "--concurrency", "2", *running.metrics_flag("worker-2")]
        )
        servers.wait_for_log(" ready.", worker, running.logs["worker-2"])
        deadline = time.monotonic() + 30
        # Both workers' loops hold their share before the load starts.
        while owned_by(url, worker.pid) < SHARDS // 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the second worker's loops did not get their half of the shards in 30 s")
            time.sleep(0.2)
    return addresses, running


def run_clients(addresses: list[str], args: argparse.Namespace, tmp: Path) -> list[dict]:
    procs = []
    for i in range(args.clients):
        out = tmp / f"client-{i}.json"
        command = throughput_command(
            addresses[i % len(addresses)], args.scenario, args.workflows, args.concurrency, "--json", str(out)
        )
        procs.append((subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=ROOT), out))
    results = []
    for proc, out in procs:
        proc.wait(timeout=600)
        results.append(json.loads(out.read_text()))
    return results


def measure(width: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="perdura-scale-") as name, contextlib.ExitStack() as stack:
        tmp = Path(name)
        addresses, running = start_layout(stack, tmp, width)
        pids = [p.pid for p in running.processes.values()]
        postgres = postmaster_pid()
        server_before, pg_before = process_tree_cpu_s(pids), process_tree_cpu_s([postgres])
        clients = run_clients(addresses, args, tmp)
        server_cpu = process_tree_cpu_s(pids) - server_before
        pg_cpu = process_tree_cpu_s([postgres]) - pg_before
        # Warm-up workflows ran too: they count in the CPU, a few percent.
        done = sum(c["workflows"] for c in clients)
        result = {
            "layout": f"{width}+{width}",
            "workflows_per_s": round(sum(c["workflows_per_s"] for c in clients), 2),
            "e2e_p50_ms": round(statistics.median(c["e2e_ms"]["p50"] for c in clients), 1),
            "e2e_p99_ms": round(max(c["e2e_ms"]["p99"] for c in clients), 1),
            "errors": sum(c["errors"] for c in clients),
            "server_cpu_ms_per_wf": round(server_cpu * 1000 / done, 2),
            "postgres_cpu_ms_per_wf": round(pg_cpu * 1000 / done, 2),
        }
        if width == 2:
            stopped = time.monotonic()
            running.processes["worker-2"].terminate()
            first = running.processes["worker"].pid
            while owned_by(running.database_url, first) < SHARDS and time.monotonic() - stopped < 60:
                time.sleep(0.05)
            result["rebalance_s"] = round(time.monotonic() - stopped, 2)
            result["shards_held_after"] = owned_by(running.database_url, first)
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenario", default="one_activity")
    parser.add_argument("--clients", type=int, default=2, help="bench/throughput.py processes at once")
    parser.add_argument("--workflows", type=int, default=200, help="workflows per client")
    parser.add_argument("--concurrency", type=int, default=16, help="workflows in flight per client")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    runs = []
    for round_ in range(args.rounds):
        # Alternating, so a drift of the machine does not always fall on the same layout.
        for width in (1, 2) if round_ % 2 == 0 else (2, 1):
            result = measure(width, args)
            print(json.dumps(result), flush=True)
            runs.append(result)
    summary = {}
    for layout in ("1+1", "2+2"):
        mine = [r for r in runs if r["layout"] == layout]
        summary[layout] = {
            k: statistics.median(r[k] for r in mine)
            for k in mine[0]
            if k not in ("layout",) and isinstance(mine[0][k], int | float)
        }
    summary["ratio_2+2_over_1+1"] = round(
        summary["2+2"]["workflows_per_s"] / summary["1+1"]["workflows_per_s"], 2
    )
    print(json.dumps(summary, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "medians": summary}, indent=2) + "\n")
    failed = any(r["errors"] for r in runs) or any(r.get("shards_held_after", SHARDS) < SHARDS for r in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
