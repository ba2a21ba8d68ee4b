"""Measuring helpers the bench scripts share, free of the SDK's imports (bench/dbos_one_step.py runs in a
virtualenv without it)."""

from __future__ import annotations

import os
import sys


def percentile(ordered: list[float], pct: float) -> float:
    """Percentile of already sorted samples, linear interpolation between closest ranks."""
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_tree_cpu_s(roots: list[int]) -> float:
    """CPU seconds (user + system) of the processes `roots` and all their descendants, from /proc (Linux).

    Each process counts its own time plus its reaped children's (cutime, cstime), so a worker that exits
    during the phase still counts; live descendants count through their own entries. A server is usually
    several processes (`perdura api` and its workers, Celery's pool, Postgres's backends under the
    postmaster): pass the parents."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": comm may hold spaces
        pid = int(entry)
        parents[pid] = int(fields[1])
        ticks[pid] = sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    wanted = set(roots)
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in wanted and pid not in wanted}
        wanted |= more
        grew = bool(more)
    return sum(ticks.get(pid, 0) for pid in wanted) / _CLOCK_TICKS


def throughput_command(
    address: str, scenario: str, workflows: int, concurrency: int, *more: str
) -> list[str]:
    """The command line of bench/throughput.py against `address`, for a bench that runs it as a client."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "throughput.py")
    return [
        sys.executable,
        script,
        *("--address", address, "--scenario", scenario),
        *("--workflows", str(workflows), "--concurrency", str(concurrency)),
        *more,
    ]
