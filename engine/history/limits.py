"""Per-run limits, with Temporal's defaults: beyond them a command fails or the run is terminated."""

from __future__ import annotations

HISTORY_COUNT_LIMIT = 50 * 1024
HISTORY_SIZE_LIMIT = 50 * 1024 * 1024
HISTORY_COUNT_SUGGEST_CONTINUE_AS_NEW = 4 * 1024
HISTORY_SIZE_SUGGEST_CONTINUE_AS_NEW = 4 * 1024 * 1024
PENDING_ACTIVITIES = 2000
PENDING_CHILDREN = 2000
PENDING_SIGNALS = 2000
PENDING_CANCEL_REQUESTS = 2000

HISTORY_COUNT_EXCEEDED = "Workflow history count exceeds limit."
HISTORY_SIZE_EXCEEDED = "Workflow history size exceeds limit."
