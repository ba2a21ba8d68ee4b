"""The workflows list's remembered settings: POSTs that set a person's columns and save or delete their views.

They are the person's own settings, not actions on runs: anyone who may see the namespace's list may
keep them (a reader too), and they reach only that person's rows (frontend/list_prefs.py). Each answers
with a redirect to the list (a refused view: to the list with the refusal's code).
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from frontend import list_filters, list_prefs
from frontend.viewer import Viewer
from frontend.views.common import console_page
from visibility import selectors


def _list_url(namespace: str) -> str:
    return reverse("console-workflows", kwargs={"namespace": namespace})


def _back(namespace: str, raw: str) -> str:
    """Where to go after the form: the list page it came from (only that page: no open redirect)."""
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc or parts.path != _list_url(namespace):
        return _list_url(namespace)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _custom(namespace_id: object) -> list[str]:
    return sorted(selectors.search_attributes_of(namespace_id=namespace_id)[1])  # type: ignore[arg-type]


def _unknown(columns: list[str], custom: list[str]) -> list[str]:
    known = set(list_filters.COLUMNS) | {list_filters.CUSTOM_PREFIX + n for n in custom}
    return [c for c in columns if c not in known]


@require_POST
@console_page
def list_columns(request: HttpRequest, viewer: Viewer, namespace: str) -> HttpResponse:
    """Remember the columns picked (for the open saved view when there is one, else for the person)."""
    ns, _role = viewer.namespace(namespace)
    custom = _custom(ns.id)
    columns = request.POST.getlist("column")
    if _unknown(columns, custom):
        return HttpResponse("unknown column", status=400, content_type="text/plain")
    view = list_prefs.view_get(namespace=ns, viewer=viewer, view_id=request.POST.get("view", ""))
    if view is not None:
        list_prefs.view_save(
            namespace=ns,
            viewer=viewer,
            name=view.name,
            query=view.query,
            time_range=view.time_range,
            columns=columns,
            custom=custom,
        )
    else:
        list_prefs.columns_set(namespace=ns, viewer=viewer, columns=columns, custom=custom)
    return HttpResponseRedirect(_back(namespace, request.POST.get("next", "")))


@require_POST
@console_page
def view_save(request: HttpRequest, viewer: Viewer, namespace: str) -> HttpResponse:
    """Save the list's current query, time range and columns under a name (replacing the person's view of
    that name)."""
    ns, _role = viewer.namespace(namespace)
    custom = _custom(ns.id)
    columns = request.POST.getlist("column")
    problem = "column" if _unknown(columns, custom) else ""
    if not problem:
        try:
            view = list_prefs.view_save(
                namespace=ns,
                viewer=viewer,
                name=request.POST.get("name", ""),
                query=request.POST.get("query", ""),
                time_range={k: request.POST.get(k, "") for k in ("range", "time_field", "from", "to")},
                columns=columns,
                custom=custom,
            )
        except list_prefs.ViewError as e:
            problem = e.code
        else:
            return HttpResponseRedirect(_list_url(namespace) + "?" + urlencode({"view": str(view.id)}))
    # Back to the list the form came from (its filter and range kept), which shows the refusal by its
    # code. A redirect, not a page rendered here: the list's live updates re-read what its URL says.
    back = {"query": request.POST.get("query", "")}
    back |= {k: request.POST[k] for k in ("range", "time_field", "from", "to") if request.POST.get(k)}
    return HttpResponseRedirect(_list_url(namespace) + "?" + urlencode(back | {"view_error": problem}))


@require_POST
@console_page
def view_delete(request: HttpRequest, viewer: Viewer, namespace: str, view_id: str) -> HttpResponse:
    ns, _role = viewer.namespace(namespace)
    if not list_prefs.view_delete(namespace=ns, viewer=viewer, view_id=view_id):
        raise Http404("saved view not found")
    return HttpResponseRedirect(_list_url(namespace))
