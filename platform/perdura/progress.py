"""A progress line for the long operator commands (key rotation, bulk export)."""

from __future__ import annotations

import sys
import time


class Bar:
    """One line on stderr: done/total, the rate and an ETA, redrawn at most 5 times a second."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.started = time.monotonic()
        self.drawn = 0.0
        self.first: int | None = None
        """The count at the first call: a resumed operation's rate counts only this run's work."""

    def show(self, done: int, total: int, *, last: bool = False) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = done
        if not last and now - self.drawn < 0.2:
            return
        self.drawn = now
        elapsed = max(now - self.started, 1e-6)
        rate = (done - self.first) / elapsed
        eta = f"{(total - done) / rate:.0f} s" if rate > 0 and total > done else "-"
        share = f"{100 * done / total:.0f}%" if total else "100%"
        sys.stderr.write(f"\r{self.what}: {done}/{total} ({share}), {rate:.0f}/s, ETA {eta}   ")
        if last:
            sys.stderr.write("\n")
        sys.stderr.flush()
