"""Per-run limits, with Temporal's defaults: beyond them a command fails or the run is terminated."""

from __future__ import annotations

from collections.abc import Mapping

HISTORY_COUNT_LIMIT = 50 * 1024
HISTORY_SIZE_LIMIT = 50 * 1024 * 1024
HISTORY_COUNT_SUGGEST_CONTINUE_AS_NEW = 4 * 1024
HISTORY_SIZE_SUGGEST_CONTINUE_AS_NEW = 4 * 1024 * 1024
PENDING_ACTIVITIES = 2000
PENDING_CHILDREN = 2000
PENDING_SIGNALS = 2000
PENDING_CANCEL_REQUESTS = 2000

RUN_MIN_INTERVAL = 1.0
"""Seconds between the starts of consecutive runs of one workflow id (continue-as-new, retries)."""

HISTORY_COUNT_EXCEEDED = "Workflow history count exceeds limit."

_OVERRIDES = {
    "PERDURA_HISTORY_COUNT_SUGGEST_CONTINUE_AS_NEW": "HISTORY_COUNT_SUGGEST_CONTINUE_AS_NEW",
    "PERDURA_HISTORY_SIZE_SUGGEST_CONTINUE_AS_NEW": "HISTORY_SIZE_SUGGEST_CONTINUE_AS_NEW",
    "PERDURA_HISTORY_COUNT_LIMIT": "HISTORY_COUNT_LIMIT",
    "PERDURA_HISTORY_SIZE_LIMIT": "HISTORY_SIZE_LIMIT",
}


def configure(environ: Mapping[str, str]) -> None:
    """Apply operator overrides (like Temporal's dynamic config), once, at process start."""
    for variable, name in _OVERRIDES.items():
        if environ.get(variable):
            globals()[name] = int(environ[variable])


HISTORY_SIZE_EXCEEDED = "Workflow history size exceeds limit."
