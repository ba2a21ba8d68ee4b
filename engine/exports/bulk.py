"""Bulk export by list query: every run a filter matches, one signed export file each (gather.py).

The runs come from a visibility scan, which yields every matching run once over its pages whatever
changes meanwhile; a run that starts after the export began may be left out. After each page the scan's
token is saved in the destination's state object (`_export.json`), so an export stopped by a crash or
Ctrl-C resumes where it was: the page in hand is read again, and its runs already written are skipped,
not written twice. Each page is one visibility query and takes a token from the namespace's visibility
bucket, so a bulk export goes no faster than the namespace's list queries may.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perdura import clock

from engine.errors import NotFound
from engine.exports import gather
from engine.exports.destinations import Destination
from tenants.models import Namespace
from visibility import selectors

STATE = "_export.json"
PAGE_SIZE = 100


class ExportConflict(Exception):
    """The destination holds another export (another namespace or query)."""


@dataclass
class Progress:
    exported: int = 0
    """Runs written by this export (over every attempt)."""
    skipped: int = 0
    """Runs found already written when a page was read again after a stop."""
    vanished: int = 0
    """Runs listed but deleted before they could be read."""
    total: int = 0
    """How many runs matched when the export began."""
    finished: bool = False

    @property
    def done(self) -> int:
        return self.exported + self.skipped + self.vanished


def run_file(run_id: str) -> str:
    return f"{run_id}.json"


def _load_state(destination: Destination, namespace: Namespace, query: str) -> dict[str, Any] | None:
    raw = destination.read(STATE)
    if raw is None:
        return None
    state = json.loads(raw)
    if state.get("namespace") != namespace.name or state.get("query") != query:
        raise ExportConflict(
            f"{destination.describe(STATE)} belongs to an export of namespace {state.get('namespace')!r} "
            f"with query {state.get('query')!r}: choose another destination"
        )
    return state


def export_query(
    *,
    namespace: Namespace,
    query: str,
    destination: Destination,
    take_token: Callable[[], None],
    page_size: int = PAGE_SIZE,
    on_progress: Callable[[Progress], None] | None = None,
) -> Progress:
    """Export every run of `namespace` that `query` matches into `destination`, resuming a stopped export.

    `take_token` blocks until the namespace's visibility bucket grants one (it is called before each page).

    Raises:
        QueryError: a bad filter.
        ExportConflict: the destination holds another export.
        SigningKeyError: no signing key is configured.
    """
    state = _load_state(destination, namespace, query)
    # Only the page in hand when an export stopped can hold runs already written: after it, no lookups.
    resumed = state is not None and not state["finished"]
    if state is None:
        total, _ = selectors.execution_count(namespace_id=namespace.id, query=query)
        state = {
            "namespace": namespace.name,
            "query": query,
            "started_at": clock.now().isoformat(),
            "total": total,
            "next_page_token": "",
            "exported": 0,
            "skipped": 0,
            "vanished": 0,
            "finished": False,
        }
        destination.write(STATE, json.dumps(state, indent=2).encode())
    progress = Progress(
        state["exported"], state["skipped"], state["vanished"], state["total"], state["finished"]
    )
    token = base64.b64decode(state["next_page_token"])
    while not progress.finished:
        take_token()
        records, token = selectors.execution_scan(
            namespace_id=namespace.id, query=query, page_size=page_size, page_token=token
        )
        for record in records:
            name = run_file(record.run_id)
            if resumed and destination.exists(name):
                progress.skipped += 1
                continue
            try:
                export = gather.build(
                    namespace=namespace, workflow_id=record.workflow_id, run_id=record.run_id
                )
            except NotFound:
                progress.vanished += 1
                continue
            data = json.dumps(export.document, ensure_ascii=False, separators=(",", ":")).encode()
            gather.record(namespace=namespace, export=export)  # before the file, as `perdura export run`
            destination.write(name, data)
            progress.exported += 1
        resumed = False
        progress.finished = not token
        state.update(
            next_page_token=base64.b64encode(token).decode(),
            exported=progress.exported,
            skipped=progress.skipped,
            vanished=progress.vanished,
            finished=progress.finished,
        )
        if progress.finished:
            state["finished_at"] = clock.now().isoformat()
        destination.write(STATE, json.dumps(state, indent=2).encode())
        if on_progress is not None:
            on_progress(progress)
    return progress
