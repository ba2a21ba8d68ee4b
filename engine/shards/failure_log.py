"""Rate-limited logging of repeated failures: a poison row must not grow the log by megabytes a minute.

The first failure of a key (a row, or a loop) is logged with its traceback; after that at most one line
per interval says how many more failures there were, with the last error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

INTERVAL_SECONDS = 60.0
MAX_KEYS = 10_000
"""Keys remembered; the oldest are forgotten first (a forgotten key logs its traceback once more)."""


@dataclass(slots=True)
class _Seen:
    logged_at: float
    suppressed: int = 0


class FailureLog:
    """Per-key rate limit on failure logging, shared by the threads of a process."""

    def __init__(self, logger: logging.Logger, *, interval: float = INTERVAL_SECONDS) -> None:
        self._logger = logger
        self._interval = interval
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, _Seen] = OrderedDict()

    def failed(
        self,
        key: str,
        message: str,
        error: BaseException,
        *,
        level: int = logging.ERROR,
        traceback: bool = True,
    ) -> None:
        """Log that `key` failed with `error` (`message` names what failed), unless it was logged lately:
        the first time with the traceback (unless `traceback` is false), then one line per interval
        counting the failures in between."""
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                self._seen[key] = _Seen(logged_at=now)
                if len(self._seen) > MAX_KEYS:
                    self._seen.popitem(last=False)
                first, repeats = True, 0
            elif now - seen.logged_at >= self._interval:
                first, repeats = False, seen.suppressed + 1
                seen.logged_at, seen.suppressed = now, 0
                self._seen.move_to_end(key)
            else:
                seen.suppressed += 1
                return
        if first and traceback:
            self._logger.log(level, "%s", message, exc_info=error)
        elif first:
            self._logger.log(level, "%s: %s: %s", message, type(error).__name__, str(error)[:500])
        else:
            self._logger.log(
                level,
                "%s (%d failures since the last report, tracebacks suppressed): %s: %s",
                message,
                repeats,
                type(error).__name__,
                str(error)[:500],
            )

    def forget(self, key: str) -> None:
        """The key succeeded (or its row is gone): its next failure is logged in full again."""
        with self._lock:
            self._seen.pop(key, None)
