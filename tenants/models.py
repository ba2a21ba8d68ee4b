"""Organisations and their members, namespaces with their data keys, and API keys."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, NoReturn

from django.conf import settings
from django.db import models
from guardian.models import UserObjectPermissionBase


class Organization(models.Model):
    """A tenant: owns namespaces and API keys; people belong to it through memberships.

    The slug is the suffix of every namespace the organisation owns (`<name>.<slug>`, as Temporal
    Cloud's `<name>.<account>`), which makes namespace names globally unique by construction.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.CharField(max_length=40, unique=True)
    name = models.CharField(max_length=255)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A person's role in an organisation (roles.OrgRole)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "user"], name="membership_unique_user")
        ]


class Namespace(models.Model):
    """A Temporal namespace: the wall around one tenant's runs, keys and limits."""

    class State(models.IntegerChoices):
        # Values match temporal.api.enums.v1.NamespaceState.
        REGISTERED = 1
        DEPRECATED = 2
        DELETED = 3

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=255, unique=True)
    # Null for the operator's own namespaces (the `default` of `perdura migrate` and `perdura dev`):
    # no API key can name them, only the unauthenticated loopback allowance reaches them.
    organization = models.ForeignKey(
        Organization, null=True, blank=True, on_delete=models.PROTECT, related_name="namespaces"
    )
    description = models.TextField(blank=True, default="")
    owner_email = models.CharField(max_length=255, blank=True, default="")
    state = models.SmallIntegerField(choices=State.choices, default=State.REGISTERED)
    retention = models.DurationField(default=timedelta(days=1))
    """How long a closed run is kept: its retention timer is due at its close time plus this (the value
    in force when the run closed). Tenants choose whole days (1-90); the operator may go down to
    PERDURA_RETENTION_MIN_SECONDS (`perdura namespace update NAME --retention 30s`)."""
    created_at = models.DateTimeField()
    # The operator's per-namespace rate overrides, bucket → requests per second (tenants/quotas.py).
    rate_limits = models.JSONField(default=dict, blank=True)
    # The namespace's codec server (https, or http on loopback): browsers send it the payloads to decode,
    # so the console can show what only the tenant's keys can read. Empty: none.
    codec_server_url = models.CharField(max_length=2048, blank=True, default="")
    # Archival (tenants/archival.py): states as temporal.api.enums.v1.ArchivalState (1 disabled, 2 enabled)
    # and the s3://bucket/prefix each kind goes to. A URI may change; each archived run records its own.
    history_archival_state = models.SmallIntegerField(default=1, db_default=1)
    history_archival_uri = models.CharField(max_length=1024, blank=True, default="", db_default="")
    visibility_archival_state = models.SmallIntegerField(default=1, db_default=1)
    visibility_archival_uri = models.CharField(max_length=1024, blank=True, default="", db_default="")
    # The default retry jitter of activities and workflow retries (engine/history/retry_jitter.py): a
    # retry waits its backoff less a deterministic share of up to this fraction (0 off, 1 full jitter).
    retry_jitter = models.FloatField(default=0.0, db_default=0.0)
    # What an activity whose retries are exhausted does by default (engine/history/parking.py): "fail",
    # as Temporal, or "park" (paused until a redrive). A perdura-on-retries-exhausted header overrides it.
    on_retries_exhausted = models.CharField(max_length=8, default="fail", db_default="fail")
    # Set, never cleared, by the namespace's first standalone activity start (in its transaction). Until
    # then no host run exists, so workflow filters need not leave them out (visibility.selectors): that
    # condition names workflow_id, which most indexes lack, and costs counts their index-only scans.
    has_standalone_activities = models.BooleanField(default=False, db_default=False)

    class Meta:
        # Per-namespace roles of people (django-guardian object permissions, tenants/roles.py):
        # reader = view_namespace (Django's default), operator and admin add these.
        permissions = [
            ("operate_namespace", "Start, signal, cancel, terminate, reset and update runs"),
            ("administer_namespace", "Change settings, search attributes, keys and access"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def retention_days(self) -> int:
        """The retention in whole days, rounded down (0 for an operator's retention under a day)."""
        return self.retention // timedelta(days=1)


class DataKey(models.Model):
    """A namespace's AES-256 data key, wrapped by the master key; versions allow rotation."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="data_keys")
    version = models.PositiveIntegerField()
    wrapped_key = models.BinaryField()
    master_key_id = models.CharField(max_length=16, default="")
    """Which master key wraps it (perdura.masterkey.key_id); empty on rows from before rotation existed."""
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace", "version"], name="datakey_unique_version")
        ]


class SubjectKey(models.Model):
    """A data subject's AES-256 key in a namespace (erasure by key destruction, tenants/subject_keys.py).

    It seals the payloads of the runs naming the subject in `PerduraDataSubject`, and is itself wrapped
    by the namespace's data key version `namespace_key_version`. Erasing the subject empties
    `wrapped_key` and sets `erased_at`: no master or namespace key can bring the key back, and the row
    stays so readers can tell an erased payload from a corrupt one. A later run of the same subject gets
    a new key (one live key per subject: the partial unique constraint).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="subject_keys")
    subject = models.CharField(max_length=2048)
    """The `PerduraDataSubject` value (a search attribute value holds up to 2 KiB, visibility's limit)."""
    namespace_key_version = models.PositiveIntegerField()
    wrapped_key = models.BinaryField()
    created_at = models.DateTimeField()
    erased_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "subject"],
                condition=models.Q(erased_at__isnull=True),
                name="subjectkey_one_live_key",
            )
        ]


class ApiKey(models.Model):
    """An API key of an organisation: a role on a set of its namespaces, until it expires or is revoked.

    Only the SHA-256 of the key is stored (tenants/api_keys.py says why a fast hash is right here);
    `prefix` is the public half that finds the row and names the key in lists, logs and errors.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=255)
    prefix = models.CharField(max_length=32, unique=True)
    secret_hash = models.CharField(max_length=64)
    role = models.CharField(max_length=16)
    namespaces = models.ManyToManyField(Namespace, related_name="api_keys")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    rotated_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    rate_limits = models.JSONField(default=dict, blank=True)
    """The key's own rates (bucket name → requests per second) in each of its namespaces; a bucket not
    named here gets PERDURA_KEY_RATE_SHARE of the namespace's rate (tenants/quotas.py)."""

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"


class NamespaceUserPermission(UserObjectPermissionBase):
    """A person's object permission on one namespace (django-guardian), with a direct foreign key
    rather than guardian's generic one, as guardian's performance guide advises."""

    content_object = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="user_permissions")

    class Meta(UserObjectPermissionBase.Meta):
        pass


class Invitation(models.Model):
    """An invitation to join an organisation, sent by email; only the token's SHA-256 is kept."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    email = models.CharField(max_length=255)
    role = models.CharField(max_length=16)
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)


class AuditEventQuerySet(models.QuerySet):
    """Rows of the audit log can be added and read, never changed or removed (tenants/audit.py)."""

    def update(self, **kwargs: Any) -> NoReturn:
        raise TypeError("the audit log is append-only: events are never updated")

    def delete(self) -> NoReturn:
        raise TypeError("the audit log is append-only: events are never deleted")


class AuditEvent(models.Model):
    """One entry of the append-only audit log: who did what to which object, from where, and how it ended.

    Organisation and namespace are plain ids, not foreign keys: an entry outlives what it names, and
    no cascade may ever delete or rewrite one. On Postgres a trigger refuses UPDATE and DELETE
    (migration 0005), except the retention's deletes of old entries (`audit.prune`, migration 0006).
    Entries never hold payloads or secrets (tenants/audit.py).
    """

    id = models.BigAutoField(primary_key=True)
    time = models.DateTimeField()
    organization_id = models.UUIDField(null=True, blank=True)
    namespace_id = models.UUIDField(null=True, blank=True)
    namespace = models.CharField(max_length=255, blank=True, default="")
    """The namespace's name when the event happened."""
    actor_kind = models.CharField(max_length=16)
    actor_id = models.CharField(max_length=64, blank=True, default="")
    actor_label = models.CharField(max_length=255, blank=True, default="")
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=512, blank=True, default="")
    source = models.CharField(max_length=128, blank=True, default="")
    via = models.CharField(max_length=8)
    outcome = models.CharField(max_length=16)
    code = models.CharField(max_length=32, blank=True, default="")
    details = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["organization_id", "time"], name="audit_org_time"),
            models.Index(fields=["namespace_id", "time"], name="audit_namespace_time"),
            models.Index(fields=["time"], name="audit_time"),  # retention (tenants/audit.py prune)
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise TypeError("the audit log is append-only: events are never updated")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("the audit log is append-only: events are never deleted")
