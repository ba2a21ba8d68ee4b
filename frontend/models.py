"""What the console remembers for a person: their workflows-list columns and their saved views, per namespace.

A person is `user:<id>` for a signed-in account and `operator` for `perdura dev`'s loopback operator
(who has no account); the user foreign key, when there is one, removes their rows with their account.
Nothing here is shared between people: every read and write is scoped by namespace and person
(frontend/list_prefs.py).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from tenants.models import Namespace


class ListColumns(models.Model):
    """The columns a person picked for a namespace's workflows list."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="+")
    person = models.CharField(max_length=64)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    columns = models.JSONField(default=list)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "person"], name="frontend_list_columns_one_per_person"
            )
        ]


class SavedView(models.Model):
    """A named filter of a namespace's workflows list (the query, its time range and its columns)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="+")
    person = models.CharField(max_length=64)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    name = models.CharField(max_length=200)
    query = models.TextField(blank=True, default="")
    time_range = models.JSONField(default=dict, blank=True)
    """The range's page parameters (`range`, `time_field`, `from`, `to`), as frontend/list_filters.py reads them."""
    columns = models.JSONField(default=list)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "person", "name"], name="frontend_saved_view_name_per_person"
            )
        ]
