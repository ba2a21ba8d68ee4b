"""What every console page does first: find the viewer (or send them to sign in) and the namespace."""

from __future__ import annotations

import functools
from collections.abc import Callable
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from frontend.viewer import Viewer, viewer_for

Page = Callable[..., HttpResponse]


def console_page(view: Page) -> Page:
    """Runs `view(request, viewer, **kwargs)` for a viewer; sends anyone else to the sign-in page."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, **kwargs: str) -> HttpResponse:
        viewer = viewer_for(request)
        if viewer is None:
            return HttpResponseRedirect(
                reverse("console-login") + "?" + urlencode({"next": request.get_full_path()})
            )
        return view(request, viewer, **kwargs)

    return wrapper


def base_context(viewer: Viewer, namespace: str | None) -> dict[str, object]:
    return {"viewer": viewer, "namespace": namespace, "namespace_names": sorted(viewer.namespaces)}
