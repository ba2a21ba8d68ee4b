"""`perdura worker` keeps its Celery worker and its shard loop alive: each runs as a child and is started again
when it dies of anything but a stop the supervisor asked for. `perdura api --processes N` runs N API processes the same
way, sharing one port (SO_REUSEPORT): a Python process serves gRPC on one core at most.

Celery's Redis transport has a known failure on broker loss: when the connection drops while the worker
holds unacknowledged messages (every timer wake-up waits in the worker, unacknowledged, until its ETA), it
tries to put them back through the connection that just closed, raises, and the worker exits with
"Unrecoverable error". The rows in the database are the truth and nothing is lost, but a worker that
stays dead fires no timer until someone restarts it. Orchestrators restart dead processes too; this makes
a Redis blip cost seconds, not an operator's page, wherever Perdura runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from perdura import shutdown

log = logging.getLogger("perdura.worker")
CHILD_ENV = "PERDURA_WORKER_CHILD"
"""Set in a child's environment to its role: the child does that work itself instead of supervising."""
FIRST_DELAY, MAX_DELAY = 1.0, 30.0
HEALTHY_SECONDS = 60.0
"""A child that ran this long before dying starts again after FIRST_DELAY, not after a grown delay."""


@dataclass(frozen=True, slots=True)
class Child:
    role: str
    """What the child does (its CHILD_ENV), for the command to tell."""
    what: str
    """Its name in the supervisor's log."""


def is_child() -> bool:
    return bool(os.environ.get(CHILD_ENV))


def role() -> str:
    """This child's role ("" in a supervisor, or a process run alone)."""
    return os.environ.get(CHILD_ENV, "")


def restart_delay(previous: float, ran_for: float) -> float:
    """The wait before the next start: doubling while the child keeps dying young, back to FIRST_DELAY
    after a healthy run (pure, for the tests)."""
    if ran_for >= HEALTHY_SECONDS:
        return FIRST_DELAY
    return min(max(previous * 2, FIRST_DELAY), MAX_DELAY)


def run(
    argv: Sequence[str],
    children: Sequence[Child],
    *,
    on_start: Callable[[], object] | None = None,
    child_exited: Callable[[int], object] | None = None,
) -> int:
    """Run a child of `argv` (this same command) for each of `children` until asked to stop; returns the
    worst status.

    Each child is started again on its own when it dies. SIGTERM and SIGINT
    are passed on to every child, which stops as it would alone (within its bound), and the supervisor
    then exits with their status instead of starting them again; a child still running STOP_SECONDS after
    the signal is killed, with the processes it started. `on_start` runs once logging is set up
    (the metrics port, perdura/metrics_server.py), `child_exited(pid)` after each child's end.
    """
    from perdura import logs

    if logs.is_json():
        logs.configure()
    else:
        logging.basicConfig(level=logging.INFO, format="[%(asctime)s: %(levelname)s/supervisor] %(message)s")
    if on_start is not None:
        on_start()
    stop = threading.Event()
    stopping_since: list[float] = []
    running: list[subprocess.Popen[bytes] | None] = [None] * len(children)
    statuses = [0] * len(children)

    def forward(signum: int, _frame: object) -> None:
        if not stopping_since:
            stopping_since.append(time.monotonic())
        stop.set()
        for child in running:
            if child is not None and child.poll() is None:
                child.send_signal(signum)

    def keep(i: int) -> None:
        delay = 0.0
        while True:
            started = time.monotonic()
            child = running[i] = subprocess.Popen(list(argv), env={**os.environ, CHILD_ENV: children[i].role})
            if stop.is_set():  # the signal came while this child was being started
                child.send_signal(signal.SIGTERM)
            statuses[i] = child.wait()
            if child_exited is not None:
                child_exited(child.pid)
            if stop.is_set():
                return
            ran_for = time.monotonic() - started
            delay = restart_delay(delay, ran_for)
            log.error(
                "%s exited with status %s after %.0fs; starting it again in %.0fs",
                children[i].what,
                statuses[i],
                ran_for,
                delay,
            )
            if stop.wait(delay):
                return

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    threads = [threading.Thread(target=keep, args=(i,), daemon=True) for i in range(len(children))]
    for t in threads:
        t.start()
    killed = False
    for t in threads:
        while t.is_alive():  # joined in steps, so that the main thread runs the signal handlers
            t.join(0.5)
            if not killed and stopping_since and time.monotonic() - stopping_since[0] > STOP_SECONDS:
                killed = True
                _kill_overdue(running, children)
    return max(statuses, key=abs)


STOP_SECONDS = shutdown.STOP_SECONDS + 1.0
"""After a stop signal the children get this long (a second past their own bound), then they and their
processes are killed: a stop never hangs. Celery's cold shutdown was seen waiting for ever on the
pool after a SIGTERM that came with the worker's first task."""


def _kill_overdue(running: Sequence[subprocess.Popen[bytes] | None], children: Sequence[Child]) -> None:
    for child, spec in zip(running, children, strict=True):
        if child is None or child.poll() is not None:
            continue
        log.error("%s did not stop within %.0fs of the stop signal; killing it", spec.what, STOP_SECONDS)
        for pid in [*_descendants(child.pid), child.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    """The processes `pid` started, and theirs (a Celery worker's pool), read from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for kid in parents.get(todo.pop(), []):
            found.append(kid)
            todo.append(kid)
    return found


def main_argv() -> list[str]:
    """This process's own command line, to start the child with."""
    return [sys.executable, "-m", "perdura.cli", *sys.argv[1:]]
