"""Namespace writes: register a namespace together with its first data key."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from perdura import clock

from tenants.datakeys import datakey_create
from tenants.models import Namespace

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")


class NamespaceError(ValueError):
    """A namespace request that cannot be honoured, with a message for a person."""


class NamespaceAlreadyExists(NamespaceError):
    pass


def namespace_register(
    *, name: str, description: str = "", retention_days: int = 1, owner_email: str = ""
) -> Namespace:
    """Create a namespace and its first data key in one transaction.

    Raises:
        NamespaceError: the name or retention is invalid.
        NamespaceAlreadyExists: the name is taken.
    """
    if not NAME_RE.match(name):
        raise NamespaceError(
            f"namespace name {name!r} is invalid: use 1-255 letters, digits, '.', '-' or '_', starting with a letter or digit"
        )
    if not 1 <= retention_days <= 90:
        raise NamespaceError(f"retention must be between 1 and 90 days, not {retention_days}")
    try:
        with transaction.atomic():
            namespace = Namespace.objects.create(
                name=name,
                description=description,
                retention_days=retention_days,
                owner_email=owner_email,
                created_at=clock.now(),
            )
            datakey_create(namespace=namespace)
    except IntegrityError:
        raise NamespaceAlreadyExists(f"namespace {name!r} already exists") from None
    return namespace


def namespace_ensure(*, name: str, retention_days: int = 1) -> Namespace:
    """The named namespace, registered first if it does not exist (used by `perdura dev` for `default`)."""
    existing = Namespace.objects.filter(name=name).first()
    if existing is not None:
        return existing
    try:
        return namespace_register(name=name, retention_days=retention_days)
    except NamespaceAlreadyExists:
        return Namespace.objects.get(name=name)
