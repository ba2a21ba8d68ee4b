"""The stop watchdog (perdura.shutdown): a process whose graceful stop hangs still exits in time."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HANGING = """
import threading, time
from perdura import shutdown
shutdown.arm_watchdog("test process", seconds=0.5)
# A non-daemon thread stuck for good, as a database call that never returns: the interpreter would wait
# for it at exit forever.
threading.Thread(target=time.sleep, args=(3600,)).start()
"""


def test_a_hanging_stop_is_cut_by_the_watchdog():
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", HANGING],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "platform")},
        capture_output=True,
        text=True,
        timeout=10,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 1
    assert "test process did not stop within" in done.stderr
    assert elapsed < 5
