"""`perdura worker` starts its Celery worker again after it dies: quickly after a healthy run, with a growing
wait while it keeps dying young (the end-to-end proof is tests/chaos/test_timer_storm.py, where Celery's
Redis transport exits on the broker's loss and the timers still fire)."""

from __future__ import annotations

from pathlib import Path

import pytest
from perdura import supervise


@pytest.mark.parametrize(
    ("previous", "ran_for", "expected"),
    [
        (0.0, 0.5, supervise.FIRST_DELAY),
        (1.0, 0.5, 2.0),
        (2.0, 3.0, 4.0),
        (16.0, 1.0, supervise.MAX_DELAY),
        (supervise.MAX_DELAY, 1.0, supervise.MAX_DELAY),
        (supervise.MAX_DELAY, supervise.HEALTHY_SECONDS, supervise.FIRST_DELAY),
    ],
)
def test_restart_delay(previous, ran_for, expected):
    assert supervise.restart_delay(previous, ran_for) == expected


STUCK = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"])
with open(sys.argv[1], "w") as out:
    out.write(str(grandchild.pid))
time.sleep(120)
"""


def test_a_child_that_does_not_stop_is_killed_with_what_it_started(tmp_path):
    """A child ignoring the stop signal (as Celery's cold shutdown once hung on its pool) is killed, and
    the processes it started with it, STOP_SECONDS after the signal: the supervisor's stop is bounded."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "grandchild.pid"
    supervisor = (
        "import sys\n"
        "from perdura import supervise\n"
        f"argv = [sys.executable, '-c', {STUCK!r}, {str(out)!r}]\n"
        "sys.exit(supervise.run(argv, [supervise.Child('stuck', 'the stuck child')]))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", supervisor], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (out.exists() and out.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int(out.read_text().split()[0])
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    took = time.monotonic() - began
    assert supervise.STOP_SECONDS <= took < supervise.STOP_SECONDS + 20, took
    assert "the stuck child did not stop within 9s of the stop signal; killing it" in proc.stderr.read()
    time.sleep(0.2)
    stat = Path(f"/proc/{grandchild}/stat")
    state = stat.read_text().rsplit(")", 1)[1].split()[0] if stat.exists() else "gone"
    assert state in ("gone", "Z"), f"the grandchild {grandchild} outlived the stop ({state})"
