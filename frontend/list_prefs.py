"""A person's workflows-list columns and saved views: the only code that reads or writes them.

Every function takes the namespace and the viewer, and touches only that person's rows in that
namespace: another person's view id is simply not found.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from django.db import IntegrityError, transaction
from perdura import clock

from frontend import list_filters
from frontend.models import ListColumns, SavedView
from frontend.viewer import Viewer
from tenants.models import Namespace

MAX_VIEWS = 50
"""Saved views per person and namespace: the list beside the query bar stays a list."""
MAX_NAME = 200
MAX_QUERY = 4096


class ViewError(ValueError):
    """A saved view that cannot be saved: no name, too long, or one too many."""

    def __init__(self, code: str) -> None:
        super().__init__(VIEW_ERRORS[code])
        self.code = code


VIEW_ERRORS = {
    "name": "a saved view needs a name",
    "long-name": f"a view's name is at most {MAX_NAME} characters",
    "long-query": f"a view's query is at most {MAX_QUERY} characters",
    "too-many": f"at most {MAX_VIEWS} saved views per namespace: delete one first",
    "column": "unknown column",
}
"""Each refusal by its code: the list page shows the message the code names (never text from the URL)."""


def columns_of(*, namespace: Namespace, viewer: Viewer) -> list[str] | None:
    """The columns the person picked for this namespace's list, or None for the default."""
    row = ListColumns.objects.filter(namespace=namespace, person=viewer.person).first()
    return list(row.columns) if row is not None else None


def columns_set(
    *, namespace: Namespace, viewer: Viewer, columns: Iterable[str], custom: Iterable[str]
) -> list[str]:
    """Remember the person's columns (unknown names dropped); returns what was stored."""
    shown = list_filters.columns_picked(columns, custom)
    ListColumns.objects.update_or_create(
        namespace=namespace,
        person=viewer.person,
        defaults={"columns": shown, "user_id": viewer.user_id, "updated_at": clock.now()},
    )
    return shown


def views_of(*, namespace: Namespace, viewer: Viewer) -> list[SavedView]:
    return list(SavedView.objects.filter(namespace=namespace, person=viewer.person).order_by("name"))


def view_get(*, namespace: Namespace, viewer: Viewer, view_id: str) -> SavedView | None:
    try:
        key = uuid.UUID(view_id)
    except ValueError:
        return None
    return SavedView.objects.filter(id=key, namespace=namespace, person=viewer.person).first()


def view_save(
    *,
    namespace: Namespace,
    viewer: Viewer,
    name: str,
    query: str,
    time_range: Mapping[str, str],
    columns: Iterable[str],
    custom: Iterable[str],
) -> SavedView:
    """Save a view under `name`, replacing the person's view of that name.

    Raises:
        ViewError: the name is empty or too long, the query too long, or the person has MAX_VIEWS views.
    """
    name = " ".join(name.split())
    if not name:
        raise ViewError("name")
    if len(name) > MAX_NAME:
        raise ViewError("long-name")
    if len(query) > MAX_QUERY:
        raise ViewError("long-query")
    now = clock.now()
    fields = {
        "query": query,
        "time_range": list_filters.time_range(time_range).params(),
        "columns": list_filters.columns_picked(columns, custom),
        "user_id": viewer.user_id,
        "updated_at": now,
    }
    mine = SavedView.objects.filter(namespace=namespace, person=viewer.person)
    with transaction.atomic():
        if mine.filter(name=name).update(**fields):
            return mine.get(name=name)
        if mine.count() >= MAX_VIEWS:
            raise ViewError("too-many")
        try:
            with transaction.atomic():
                return SavedView.objects.create(
                    namespace=namespace, person=viewer.person, name=name, created_at=now, **fields
                )
        except IntegrityError:
            # The same name saved meanwhile (another tab): this save replaces it, as it would have.
            mine.filter(name=name).update(**fields)
            return mine.get(name=name)


def view_delete(*, namespace: Namespace, viewer: Viewer, view_id: str) -> bool:
    """Delete one of the person's views; False when they have no such view."""
    view = view_get(namespace=namespace, viewer=viewer, view_id=view_id)
    if view is None:
        return False
    view.delete()
    return True
