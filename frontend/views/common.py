"""What every console page does first: find the viewer (or send them to sign in) and the namespace."""

from __future__ import annotations

import functools
from collections.abc import Callable
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from frontend.viewer import Viewer, viewer_for

Page = Callable[..., HttpResponse]


class ArchiveUnreadable(Exception):
    """A run that retention deleted cannot be shown from its archive now (the store does not answer, or
    the object is missing or does not open): the page answers 503 with the reason."""


def console_page(view: Page) -> Page:
    """Runs `view(request, viewer, **kwargs)` for a viewer; sends anyone else to the sign-in page."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, **kwargs: str) -> HttpResponse:
        viewer = viewer_for(request)
        if viewer is None:
            return HttpResponseRedirect(
                reverse("console-login") + "?" + urlencode({"next": request.get_full_path()})
            )
        try:
            return view(request, viewer, **kwargs)
        except ArchiveUnreadable as e:
            return HttpResponse(
                f"This run was deleted by retention and its archive cannot be read now: {e}",
                status=503,
                content_type="text/plain",
            )

    return wrapper


def base_context(viewer: Viewer, namespace: str | None) -> dict[str, object]:
    return {"viewer": viewer, "namespace": namespace, "namespace_names": sorted(viewer.namespaces)}
