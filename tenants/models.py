"""Namespaces and their data keys (organisations, members and API keys come with the control plane)."""

from __future__ import annotations

import uuid

from django.db import models


class Namespace(models.Model):
    """A Temporal namespace: the wall around one tenant's runs, keys and limits."""

    class State(models.IntegerChoices):
        # Values match temporal.api.enums.v1.NamespaceState.
        REGISTERED = 1
        DEPRECATED = 2
        DELETED = 3

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=255, unique=True)
    description = models.TextField(blank=True, default="")
    owner_email = models.CharField(max_length=255, blank=True, default="")
    state = models.SmallIntegerField(choices=State.choices, default=State.REGISTERED)
    retention_days = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.name


class DataKey(models.Model):
    """A namespace's AES-256 data key, wrapped by the master key; versions allow rotation."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="data_keys")
    version = models.PositiveIntegerField()
    wrapped_key = models.BinaryField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "version"], name="datakey_unique_version")
        ]
