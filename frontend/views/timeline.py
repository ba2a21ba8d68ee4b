"""The run page's timeline part: its bars read from the whole history (frontend/timeline.py), a page of
rows at a time, and `…/<run id>/timeline`, which answers that part alone to htmx paging.

The timeline reads every event of the run (its bars span the whole history); only the page of rows shown
is drawn, 100 rows by default the newest, so a 10,000-event run's page stays small.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from perdura import clock
from temporalio.api.history.v1 import HistoryEvent

from engine.errors import FailedPrecondition, NotFound, Unavailable
from engine.services import console_reads
from frontend import timeline
from frontend.viewer import Viewer
from frontend.views.common import ArchiveUnreadable, base_context, console_page

PARAM = "timeline"
"""The query parameter holding the timeline's page (absent: the newest rows)."""

KINDS = [
    ("workflow", "Workflow"),
    ("activity", "Activity"),
    ("timer", "Timer"),
    ("child", "Child workflow"),
    ("signal", "Signal"),
    ("update", "Update"),
    ("marker", "Marker"),
]


def _page_param(params: Mapping[str, str]) -> int:
    try:
        return max(int(params.get(PARAM) or 0), 0)
    except ValueError:
        return 0


def timeline_context(
    run: console_reads.RunView,
    *,
    namespace: str,
    params: Mapping[str, str],
    events: Iterable[HistoryEvent] | None = None,
) -> dict[str, object]:
    """The timeline part of the run page, as the page's query string asks (`timeline=<page>`).

    `events` is the run's whole history when the caller has read it already (the compact view does).
    """
    execution = run.execution
    read = console_reads.run_whole_history(run) if events is None else events
    now = clock.now()
    bars = timeline.bars(read, pending=list(run.describe.pending_activities))
    page = timeline.layout(bars, now=now, page=_page_param(params))
    kwargs = {"namespace": namespace, "workflow_id": execution.workflow_id, "run_id": execution.run_id}
    run_url = reverse("console-run", kwargs=kwargs)
    part_url = reverse("console-run-timeline", kwargs=kwargs)
    kept = {k: v for k, v in params.items() if k != PARAM}

    def links(number: int) -> dict[str, str]:
        query = urlencode(kept | {PARAM: number})
        return {"page": f"{part_url}?{query}", "push": f"{run_url}?{query}"}

    pager: dict[str, dict[str, str]] = {}
    if page.page > 1:
        pager["first"], pager["prev"] = links(1), links(page.page - 1)
    if page.page < page.pages:
        pager["next"], pager["last"] = links(page.page + 1), links(page.pages)
    kinds = {row.bar.kind for row in page.rows}
    return {
        "page": page,
        "pager": pager,
        "run_url": run_url,
        "legend": [(kind, label) for kind, label in KINDS if kind in kinds],
        "last_row": page.first_row + len(page.rows) - 1,
    }


@console_page
def run_timeline(
    request: HttpRequest, viewer: Viewer, namespace: str, workflow_id: str, run_id: str
) -> HttpResponse:
    """The timeline part alone (htmx paging); 404 as the run page answers it."""
    ns, _role = viewer.namespace(namespace)
    try:
        run = console_reads.run_view(namespace_id=ns.id, workflow_id=workflow_id, run_id=run_id)
    except NotFound:
        raise Http404("workflow run not found") from None
    except (Unavailable, FailedPrecondition) as e:  # archived, and its archive cannot be read now
        raise ArchiveUnreadable(str(e)) from None
    context = base_context(viewer, namespace) | {
        "timeline": timeline_context(run, namespace=namespace, params=request.GET)
    }
    return render(request, "frontend/_timeline.html", context)
