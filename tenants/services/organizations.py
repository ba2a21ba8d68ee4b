"""Organisations: create (with the first owner), check a name is free, rename."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from perdura import clock

from tenants import audit
from tenants.access import Actor
from tenants.errors import Forbidden, OrganizationAlreadyExists, TenantError
from tenants.models import Organization
from tenants.roles import OrgRole
from tenants.services import members

SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")


def _check_slug(slug: str) -> None:
    if not SLUG_RE.match(slug):
        raise TenantError(
            f"organisation name {slug!r} is invalid: use 1-40 lowercase letters, digits or '-', "
            "starting and ending with a letter or digit (it becomes the suffix of its namespaces)"
        )


def organization_check_free(*, slug: str) -> None:
    """Raise what `organization_create` would for `slug` (TenantError, OrganizationAlreadyExists)."""
    _check_slug(slug)
    if Organization.objects.filter(slug=slug).exists():
        raise OrganizationAlreadyExists(f"organisation {slug!r} already exists")


def organization_create(*, slug: str, owner_email: str, name: str = "") -> Organization:
    """Create an organisation with its first owner (a Django user, created if the email is new).

    Raises:
        TenantError: the slug or email is invalid.
        OrganizationAlreadyExists: the slug is taken.
    """
    _check_slug(slug)
    try:
        with transaction.atomic():
            organization = Organization.objects.create(slug=slug, name=name or slug, created_at=clock.now())
            audit.record_change(
                action="organization.create", target=f"organization/{slug}", organization=organization
            )
            members.member_add(organization=organization, email=owner_email, role=OrgRole.OWNER)
    except IntegrityError:
        raise OrganizationAlreadyExists(f"organisation {slug!r} already exists") from None
    return organization


def organization_update(*, actor: Actor, name: str) -> Organization:
    """Rename the organisation (its display name; the slug in namespace names never changes).

    Raises:
        Forbidden: the actor is not an owner or admin.
        TenantError: the name is empty or too long.
    """
    if not actor.is_org_admin:
        raise Forbidden("only owners and admins of the organisation change it")
    name = name.strip()
    if not name or len(name) > 255:
        raise TenantError("the organisation name must have 1-255 characters")
    actor.organization.name = name
    with transaction.atomic():
        actor.organization.save(update_fields=["name"])
        audit.record_change(
            action="organization.update",
            target=f"organization/{actor.organization.slug}",
            organization=actor.organization,
            details={"name": name},
        )
    return actor.organization
