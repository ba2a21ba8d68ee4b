"""`/`: the default namespace's workflows (or the first one the viewer may see; a person who sees none,
their organisation's namespaces page)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from frontend.viewer import Viewer
from frontend.views.common import base_context, console_page


@console_page
def home(request: HttpRequest, viewer: Viewer) -> HttpResponse:
    names = sorted(viewer.namespaces)
    if not names and not viewer.operator:
        # The organisation's page: its first steps for an owner or admin, who to ask for anyone else.
        return HttpResponseRedirect(reverse("console-namespaces"))
    if not names:
        return render(request, "frontend/no_namespaces.html", base_context(viewer, None))
    name = "default" if "default" in viewer.namespaces else names[0]
    return HttpResponseRedirect(reverse("console-workflows", kwargs={"namespace": name}))
