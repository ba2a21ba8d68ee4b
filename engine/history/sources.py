"""What the rules cannot derive from their inputs, given to them by the caller: the clock's reading is a
Mutation's `now`, and new ids come from an IdSource. The same inputs then give the same events, which
is what lets tests (and a rebuild) reproduce a run exactly."""

from __future__ import annotations

from typing import Protocol


class IdSource(Protocol):
    def run_id(self) -> str:
        """A new run's id (a retry's, a cron run's, a continue-as-new's)."""
        ...

    def request_id(self) -> str:
        """A request id for a start the server makes itself (an eager activity's)."""
        ...
