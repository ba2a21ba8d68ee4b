"""The dashboard's small charts: a namespace's starts and failures per interval, drawn as SVG on the server.

Counts come from the visibility backend in one read per series (`execution_count_by_interval`); the
drawing is a pure function from the counts to bar rectangles, so the page needs no script and no
chart library, and the Content-Security-Policy stays closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from perdura import clock

from tenants.models import Namespace
from visibility import selectors as visibility


@dataclass(frozen=True, slots=True)
class Window:
    """A time range the dashboard charts, cut into equal intervals."""

    name: str
    label: str
    step: timedelta
    buckets: int


WINDOWS = (
    Window("24h", "24 hours", timedelta(hours=1), 24),
    Window("7d", "7 days", timedelta(hours=6), 28),
)


def window_named(name: str) -> Window:
    """The window called `name` (24h when unknown)."""
    return next((w for w in WINDOWS if w.name == name), WINDOWS[0])


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    """A drawn chart: the bars of starts and of failures, and what they add up to."""

    width: int
    height: int
    starts: list[Bar]
    failures: list[Bar]
    total_starts: int
    total_failures: int
    peak: int


WIDTH, HEIGHT = 240, 48


def _start_of(window: Window, now: datetime) -> datetime:
    """The first interval's start: the last one ends at the next whole step after `now`."""
    step = window.step.total_seconds()
    epoch = now.timestamp()
    end = (int(epoch // step) + 1) * step
    return datetime.fromtimestamp(end - step * window.buckets, tz=now.tzinfo)


def draw(starts: list[int], failures: list[int], *, start: datetime, step: timedelta) -> Chart:
    """Bars for each interval (failures drawn over starts, on the same scale)."""
    peak = max([*starts, *failures, 1])
    slot = WIDTH / max(len(starts), 1)
    gap = 1.0 if slot > 3 else 0.0

    def bars(counts: list[int], what: str) -> list[Bar]:
        drawn = []
        for i, n in enumerate(counts):
            if n == 0:
                continue
            height = max(HEIGHT * n / peak, 1.0)
            at = start + step * i
            drawn.append(
                Bar(
                    x=round(i * slot, 2),
                    y=round(HEIGHT - height, 2),
                    width=round(slot - gap, 2),
                    height=round(height, 2),
                    title=f"{at:%Y-%m-%d %H:%M} UTC: {n} {what}",
                )
            )
        return drawn

    return Chart(
        width=WIDTH,
        height=HEIGHT,
        starts=bars(starts, "started"),
        failures=bars(failures, "failed"),
        total_starts=sum(starts),
        total_failures=sum(failures),
        peak=peak,
    )


def namespace_chart(*, namespace: Namespace, window: Window) -> Chart:
    """Starts (by StartTime) and failures (runs closed as Failed, by CloseTime) over `window`."""
    start = _start_of(window, clock.now())

    def series(query: str, field: str) -> list[int]:
        return visibility.execution_count_by_interval(
            namespace_id=namespace.id,
            query=query,
            field=field,
            start=start,
            step=window.step,
            buckets=window.buckets,
        )

    starts = series("", "StartTime")
    failures = series("ExecutionStatus = 'Failed'", "CloseTime")
    return draw(starts, failures, start=start, step=window.step)
