"""Per-run export figures: size and time of `perdura export run` and `perdura export verify` for a long run.

Starts a `perdura dev` of its own (SQLite), grows one run's history to `--events` events with signals
sent through the official SDK (a worker running, so workflow tasks interleave as in real use), closes it,
then times:

- `perdura export run` end to end (a process: Django set-up, reads, decryption, signing, writing),
  the in-process part it reports, and its peak resident memory;
- `perdura export verify` end to end (a process without Django or a database), and `manifest.verify`
  in process;
- the SDK's `WorkflowHistory.from_json` on the file.

Like bench/poison_neighbour.py it is Perdura-specific and imports the test support that starts servers.

Usage::

    python bench/run_export.py [--events 10000] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from temporalio.client import Client, WorkflowHistory  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from engine.exports import manifest  # noqa: E402
from tests.e2e.export_workflows import ManySignalsWorkflow  # noqa: E402
from tests.support import servers  # noqa: E402

CHUNK = 200


async def grow(address: str, events: int) -> tuple[str, str, int]:
    client = await Client.connect(address, namespace="default")
    queue = f"bench-{uuid.uuid4()}"
    workflow_id = f"export-bench-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[ManySignalsWorkflow]):
        handle = await client.start_workflow(ManySignalsWorkflow.run, id=workflow_id, task_queue=queue)
        length = 0
        sent = 0
        while length < events - 10:
            room = max(1, min(CHUNK, (events - 10 - length) // 2))
            await asyncio.gather(*(handle.signal(ManySignalsWorkflow.tick, sent + i) for i in range(room)))
            sent += room
            length = (await handle.describe()).raw_description.workflow_execution_info.history_length
        await handle.signal(ManySignalsWorkflow.stop)
        await handle.result()
    info = (await handle.describe()).raw_description.workflow_execution_info
    return workflow_id, info.execution.run_id, info.history_length


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, servers.dev_server(Path(tmp)) as server:
        started = time.monotonic()
        workflow_id, run_id, length = asyncio.run(grow(server.address, args.events))
        grown = time.monotonic() - started
        out = Path(tmp) / "export.json"
        env = dict(server.env, PERDURA_DATABASE_URL=f"sqlite:///{server.db_file}")
        started = time.monotonic()
        done = subprocess.run(
            [servers.PERDURA, "export", "run", "--namespace", "default", "--workflow-id", workflow_id,
             "--run-id", run_id, "--output", str(out)],
            env=env, capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
        export_seconds = time.monotonic() - started
        if done.returncode:
            raise SystemExit(done.stderr)
        reported = done.stderr.strip().splitlines()[-1]
        # The largest waited-for child so far is the export process (the dev server is still running).
        export_peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        started = time.monotonic()
        checked = subprocess.run(
            [servers.PERDURA, "export", "verify", str(out)], capture_output=True, text=True, cwd=tmp
        )
        verify_seconds = time.monotonic() - started
        if checked.returncode:
            raise SystemExit(checked.stdout + checked.stderr)
        document = json.loads(out.read_bytes())
        started = time.monotonic()
        verdict = manifest.verify(document)
        verify_in_process = time.monotonic() - started
        assert verdict.ok, verdict.message
        started = time.monotonic()
        history = WorkflowHistory.from_json(workflow_id, out.read_text())
        load_seconds = time.monotonic() - started
        figures = {
            "events": length,
            "sdk_events_loaded": len(history.events),
            "audit_entries": len(document["audit"]),
            "grow_seconds": round(grown, 1),
            "export_bytes": out.stat().st_size,
            "export_process_seconds": round(export_seconds, 2),
            "export_reported": reported,
            "export_peak_rss_mb": round(export_peak_mb),
            "verify_process_seconds": round(verify_seconds, 2),
            "verify_in_process_seconds": round(verify_in_process, 3),
            "sdk_from_json_seconds": round(load_seconds, 3),
        }
        print(json.dumps(figures, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
