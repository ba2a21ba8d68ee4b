"""Stopping a process within a bound: after SIGTERM, a graceful stop gets a few seconds, then the process
exits anyway (whatever a thread is stuck in), so a supervisor's stop never hangs."""

from __future__ import annotations

import os
import sys
import threading

STOP_SECONDS = 8.0
"""The graceful stop's allowance; under the 10 s that supervisors (and Kubernetes' default 30 s) give."""


def arm_watchdog(what: str, seconds: float = STOP_SECONDS) -> None:
    """From now on the process has `seconds` to exit by itself; after that it exits at once (status 1)."""

    def force() -> None:
        sys.stderr.write(f"{what} did not stop within {seconds:.0f} s of the stop signal; exiting now\n")
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(seconds, force)
    timer.daemon = True
    timer.name = "perdura-stop-watchdog"
    timer.start()
