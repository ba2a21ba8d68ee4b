"""now(): the one place Perdura reads the wall clock, so tests and rules agree on time."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)
