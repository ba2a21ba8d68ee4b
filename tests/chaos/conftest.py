"""Chaos tests: each kills, stops or restarts a real part under load and prints its figure.

PERDURA_CHAOS_SCALE picks the size: `ci` (the default, what `make test` runs: the whole folder in
about two and a half minutes) or `full` (the sizes of issue 10, e.g. 100,000 timers; minutes each).
Each test prints one `CHAOS <name>: ...` line; `pytest -s tests/chaos` shows them.
"""

from __future__ import annotations

import os

SCALE = os.environ.get("PERDURA_CHAOS_SCALE", "ci")
if SCALE not in ("ci", "full"):
    raise RuntimeError(f"PERDURA_CHAOS_SCALE must be ci or full, not {SCALE!r}")


def scaled(ci: int, full: int) -> int:
    return full if SCALE == "full" else ci


def report(name: str, figure: str) -> None:
    """One line per test, collected by the lead from `pytest -s` output."""
    print(f"\nCHAOS {name}: {figure} [scale {SCALE}]", flush=True)
