"""Key rotation figures: how fast a re-encryption (`perdura namespace reencrypt`) moves a namespace's ciphertexts to a new
data key version, and how long `perdura masterkey rotate` takes.

Starts its own server (`perdura dev` on SQLite, or the production processes on a fresh Postgres
database), fills the `default` namespace with `--runs` closed runs (each: a start, an activity and its
result, so a state, a few history batches and a memo) through the official SDK, then times, as
processes, `perdura namespace rotate-key default --no-reencrypt` followed by
`perdura namespace reencrypt default --wait` (the job runs in the shard workers, in-process in
`perdura dev`; the CLI follows it and reports its time from when it was due: runs and ciphertexts a
second, within the CLI's poll of WAIT_POLL_SECONDS), and a master key rotation's
`perdura masterkey rotate`.

Like bench/poison_neighbour.py it is Perdura-specific and imports the test support that starts servers.

Usage::

    python bench/key_rotation.py [--mode dev|production] [--runs 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from tests.e2e import workflows as w  # noqa: E402
from tests.support import servers  # noqa: E402


async def _fill(address: str, runs: int) -> float:
    client = await Client.connect(address, namespace="default")
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    async with Worker(client, task_queue=queue, workflows=w.ALL_WORKFLOWS, activities=w.ALL_ACTIVITIES):
        for first in range(0, runs, 200):
            await asyncio.gather(
                *(
                    client.execute_workflow(
                        w.HelloWorkflow.run, f"n{i}", id=f"rot-{i}", task_queue=queue, memo={"note": "bench"}
                    )
                    for i in range(first, min(first + 200, runs))
                )
            )
    return time.monotonic() - started


def _timed_cli(env: dict[str, str], *args: str) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(
        [servers.PERDURA, *args], env=env, cwd=servers.ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"perdura {' '.join(args)} failed:\n{done.stderr}")
    return time.monotonic() - started, done.stdout + done.stderr


@contextlib.contextmanager
def _server(mode: str, tmp: Path, master_key: str):
    env = {"PERDURA_MASTER_KEY": master_key, "PERDURA_DATAKEY_REFRESH_SECONDS": "0"}
    if mode == "dev":
        with servers.dev_server(tmp, env=env) as running:
            yield running, dict(running.env, PERDURA_DATABASE_URL=f"sqlite:///{running.db_file}")
    else:
        with servers.postgres_database() as url, servers.production(tmp, url, env=env) as running:
            yield running, dict(running.env, PERDURA_DATABASE_URL=url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["dev", "production"], default="dev")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--json")
    args = parser.parse_args()
    old, new = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    result: dict[str, object] = {"mode": args.mode, "runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp, _server(args.mode, Path(tmp), old) as (running, env):
        result["fill_seconds"] = round(asyncio.run(_fill(running.address, args.runs)), 2)
        _timed_cli(env, "namespace", "rotate-key", "default", "--no-reencrypt")
        seconds, out = _timed_cli(env, "namespace", "reencrypt", "default", "--wait")
        found = re.search(r"(\d+) ciphertexts sealed again .* in ([\d.]+)s", out)
        moved, inside = int(found.group(1)), float(found.group(2))
        result["reencrypt"] = {
            "process_seconds": round(seconds, 2),
            "move_seconds": inside,
            "ciphertexts": moved,
            "ciphertexts_per_s": round(moved / inside),
            "runs_per_s": round(args.runs / inside),
        }
        _, status = _timed_cli(env, "namespace", "reencrypt", "default", "--status")
        result["left_under_older_versions"] = int(re.search(r"(\d+) under older versions", status).group(1))
        seconds, _ = _timed_cli(
            dict(env, PERDURA_MASTER_KEY=new, PERDURA_MASTER_KEY_PREVIOUS=old), "masterkey", "rotate"
        )
        result["masterkey_rotate_seconds"] = round(seconds, 2)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
