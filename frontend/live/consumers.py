"""The console's websockets: one consumer per page kind (list, run) sends the page's changed parts.

A page opens `/live<its path>` and tells the consumer what it shows (its query string, again after htmx
paging). The consumer joins the channel group of the namespace (list) or the run (engine/live.py
publishes "run changed" there after commit) and, on each hint, re-reads through the same code as the
page (frontend/views) and sends the rendered parts; console.js puts each in place of the element with
its id. Hints are coalesced: at most one render per MIN_INTERVAL per socket (longer after a slow render),
and never two at once. Every render re-reads the session and the viewer's roles, so a sign-out or a lost role stops the
updates as it stops the pages. A connection is refused, as a page is answered 404 or sent to sign
in, for a namespace or run the viewer may not see, and when its Origin is not the page's own host
(another site's page cannot open a socket with the person's cookies).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from importlib import import_module
from types import SimpleNamespace
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib import auth
from django.http import Http404, QueryDict
from django.template.loader import render_to_string

from engine import live
from engine.errors import NotFound
from engine.services import console_reads
from frontend.viewer import Viewer, viewer_of
from frontend.views import batches, runs, workflows

log = logging.getLogger(__name__)

MIN_INTERVAL = 0.2
"""Seconds between two renders of one socket: a busy namespace costs each open list five renders a second
at most, however many runs change."""
SLOW_RENDER = 0.5
"""Seconds: a render this slow is a long history's, not a hiccup of a busy machine."""
SLOW_RENDER_REST = 2.0
MAX_SEARCH = 4096
REFUSED = 4403


def _headers(scope: dict) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def same_origin(scope: dict) -> bool:
    """The socket was opened by a page of this host: browsers send cookies with websockets to any site,
    so without this check another site's page could read the console as the signed-in person."""
    headers = _headers(scope)
    origin, host = headers.get("origin", ""), headers.get("host", "")
    parts = urlsplit(origin)
    return bool(host) and parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


def viewer_of_scope(scope: dict) -> Viewer | None:
    """The viewer, exactly as for a page: the session read afresh (a sign-out ends it), then frontend.viewer."""
    key = scope.get("cookies", {}).get(settings.SESSION_COOKIE_NAME)
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=key)
    user = auth.get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]  # get_user reads only request.session
    client = scope.get("client") or ("", 0)
    return viewer_of(user=user, address=client[0] or "", host=_headers(scope).get("host", ""))


def _in_thread(function: Callable) -> Callable:
    """Run `function` on a pooled thread: the default (thread-sensitive) would put every socket's renders
    of the process on one shared thread, one after the other."""
    return database_sync_to_async(function, thread_sensitive=False)


class _PageConsumer(AsyncWebsocketConsumer):
    def _groups(self, viewer: Viewer) -> list[str]:
        """The groups to join. Raises Http404 when the viewer may not see the page."""
        raise NotImplementedError

    def _render(self, viewer: Viewer) -> str:
        """The page's live parts, read now ("" when there is nothing to send). Raises Http404."""
        raise NotImplementedError

    async def connect(self) -> None:
        self.kwargs: dict[str, str] = self.scope["url_route"]["kwargs"]
        self.params = QueryDict(self.scope.get("query_string", b"").decode("latin-1"))
        self.joined: list[str] = []
        self.dirty = False
        self.worker: asyncio.Task | None = None
        self.last = ""
        if not same_origin(self.scope):
            await self.close(code=REFUSED)
            return
        joined = await _in_thread(self._authorised_groups)()
        if not joined:
            await self.close(code=REFUSED)
            return
        live.sender.use_loop(asyncio.get_running_loop())
        for group in joined:
            await self.channel_layer.group_add(group, self.channel_name)
        self.joined = joined
        await self._watch()  # before the page's first message, whose version check must come after it
        self.watching = asyncio.get_running_loop().create_task(self._keep_watching())
        await self.accept()

    def _authorised_groups(self) -> list[str]:
        viewer = viewer_of_scope(self.scope)
        if viewer is None:
            return []
        try:
            return self._groups(viewer)
        except Http404:
            return []

    async def _watch(self) -> None:
        """Register the groups as watched: on Redis, engine/live.py sends only to watched groups."""
        try:
            await live.watch(self.joined)
        except Exception:  # Redis away: hints are lost anyway; the next round tries again
            log.warning("console live watch failed", exc_info=True)

    async def _keep_watching(self) -> None:
        while True:
            await asyncio.sleep(live.WATCH_SECONDS / 3)
            await self._watch()

    async def disconnect(self, code: int) -> None:
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        for task in (self.worker, getattr(self, "watching", None)):
            if task is not None:
                task.cancel()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The page says what it shows (`{"search": location.search}`): on open (which re-reads whatever
        changed before the socket joined its groups) and after htmx paging."""
        try:
            told = json.loads(text_data or "{}")
            search, version = told.get("search", ""), told.get("version")
        except (ValueError, AttributeError):
            return
        if not isinstance(search, str) or len(search) > MAX_SEARCH:
            return
        self.params = QueryDict(search.removeprefix("?"))
        self.last = ""
        if not await _in_thread(self._current)(version):
            self._changed()

    def _current(self, version: object) -> bool:
        """The page shows the data as it is now (so the first re-read of a big run page is skipped)."""
        return False

    async def run_changed(self, event: dict) -> None:
        self._changed()

    def _changed(self) -> None:
        self.dirty = True
        if self.worker is None or self.worker.done():
            self.worker = asyncio.get_running_loop().create_task(self._render_loop())

    async def _render_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while self.dirty:
            self.dirty = False
            started = loop.time()
            try:
                html = await _in_thread(self._render_now)()
            except Exception:  # e.g. the database is away: this update is lost, the next hint tries again
                log.warning("console live render failed", exc_info=True)
                html = ""
            if html is None:
                await self.close(code=REFUSED)
                return
            if html and html != self.last:
                self.last = html
                await self.send(text_data=html)
            # Renders start MIN_INTERVAL apart at least, and a slow one (the compact view of a long
            # history) is followed by twice its time of rest, so such a socket keeps a thread busy a third
            # of the time at most. Hints meanwhile are coalesced into the next render.
            took = loop.time() - started
            rest = SLOW_RENDER_REST * took if took > SLOW_RENDER else MIN_INTERVAL - took
            await asyncio.sleep(max(rest, 0))

    def _render_now(self) -> str | None:
        viewer = viewer_of_scope(self.scope)
        if viewer is None:
            return None
        try:
            return self._render(viewer)
        except Http404:
            return None


class ListConsumer(_PageConsumer):
    """`/live/namespaces/<ns>/workflows`: the count, the status chips and the table of the list page."""

    def _groups(self, viewer: Viewer) -> list[str]:
        ns, _role = viewer.namespace(self.kwargs["namespace"])
        self.namespace_id = ns.id
        return [live.namespace_group(ns.id)]

    def _current(self, version: object) -> bool:
        # The group was joined before this check: a change after it sends a hint.
        return version is not None and live.namespace_version(self.namespace_id) == str(version)

    def _render(self, viewer: Viewer) -> str:
        context = workflows.list_context(viewer, namespace=self.kwargs["namespace"], params=self.params)
        if context["problem"]:
            return ""
        return render_to_string("frontend/_workflows_live.html", context)


class RunConsumer(_PageConsumer):
    """`/live/namespaces/<ns>/workflows/<wid>/<rid>/history`: the run page's status, summary, outcome,
    pending work, search attributes and memo, and its history as the page shows it (view, order, page)."""

    def _groups(self, viewer: Viewer) -> list[str]:
        ns, _role = viewer.namespace(self.kwargs["namespace"])
        try:
            run = console_reads.run_view(
                namespace_id=ns.id, workflow_id=self.kwargs["workflow_id"], run_id=self.kwargs["run_id"]
            )
        except NotFound:
            raise Http404("workflow run not found") from None
        self.execution_pk = run.execution.pk
        return [live.run_group(ns.id, run.execution.pk)]

    def _current(self, version: object) -> bool:
        # The groups were joined before this check: a change after it sends a hint.
        return version is not None and str(console_reads.run_version(self.execution_pk)) == str(version)

    def _render(self, viewer: Viewer) -> str:
        context = runs.run_context(viewer, params=self.params, **self.kwargs)
        return render_to_string("frontend/_run_live.html", context)


class BatchConsumer(_PageConsumer):
    """`/live/namespaces/<ns>/batch-operations/<job id>`: the batch's state and progress.

    Every target's action changes its run, whose commit hints the namespace's group: the page re-reads
    the batch then (at most five times a second). A tick every TICK_SECONDS covers what changes no run
    (a stop, a target that was gone) while the batch runs."""

    TICK_SECONDS = 1.0

    def _groups(self, viewer: Viewer) -> list[str]:
        ns, _role = viewer.namespace(self.kwargs["namespace"])
        return [live.namespace_group(ns.id)]

    async def connect(self) -> None:
        await super().connect()
        if self.joined:
            self.ticker = asyncio.get_running_loop().create_task(self._tick())

    async def disconnect(self, code: int) -> None:
        await super().disconnect(code)
        ticker = getattr(self, "ticker", None)
        if ticker is not None:
            ticker.cancel()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.TICK_SECONDS)
            if "Running" in (self.last or "Running"):
                self._changed()

    def _render(self, viewer: Viewer) -> str:
        context = batches.detail_context(
            viewer, namespace=self.kwargs["namespace"], job_id=self.kwargs["job_id"]
        )
        return render_to_string("frontend/_batch_live.html", context)
