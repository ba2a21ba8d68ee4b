"""`/`: the default namespace's workflows (or the first one the viewer may see)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from frontend.viewer import Viewer
from frontend.views.common import base_context, console_page


@console_page
def home(request: HttpRequest, viewer: Viewer) -> HttpResponse:
    names = sorted(viewer.namespaces)
    if not names:
        return render(request, "frontend/no_namespaces.html", base_context(viewer, None))
    name = "default" if "default" in viewer.namespaces else names[0]
    return HttpResponseRedirect(reverse("console-workflows", kwargs={"namespace": name}))
