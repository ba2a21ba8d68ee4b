"""Who is acting and what they may reach: scoped fetches that answer NotFound alike for missing and forbidden.

An `Actor` is a person acting in one organisation (with their organisation role and per-namespace
roles from django-guardian) or an API key (its role on its namespaces). Every object the REST API
touches is fetched through here, inside the actor's organisation, so another tenant's ids look like
ids that do not exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from tenants import roles
from tenants.auth import Principal
from tenants.models import ApiKey, Invitation, Membership, Namespace, NamespaceUserPermission, Organization
from tenants.roles import KeyRole, OrgRole


class NotFound(LookupError):
    """The object does not exist, or exists outside what the actor may see (the same answer)."""


@dataclass(frozen=True, slots=True)
class Actor:
    """A person in one organisation, or an API key of it."""

    organization: Organization
    user: Any | None = None
    """The Django user, for a person."""
    org_role: OrgRole | None = None
    """The person's organisation role (None for a key)."""
    key: Principal | None = None
    """The API key, for a key."""
    _grants: dict[str, KeyRole] = field(default_factory=dict, compare=False)

    @property
    def is_org_admin(self) -> bool:
        return self.org_role in roles.ORG_ADMINS

    @property
    def label(self) -> str:
        """How logs name the actor (never a secret)."""
        if self.key is not None:
            return self.key.label
        return f"user {getattr(self.user, 'pk', '?')}"

    def namespace_role(self, namespace: Namespace) -> KeyRole | None:
        """The actor's role on `namespace`: a key's role on its namespaces; admin for organisation
        owners and admins; a member's guardian grant; None otherwise."""
        if namespace.organization_id != self.organization.id or namespace.state == Namespace.State.DELETED:
            return None
        if self.key is not None:
            return KeyRole(self.key.role) if str(namespace.id) in self.key.namespace_ids else None
        if self.is_org_admin:
            return KeyRole.ADMIN
        return self._grants.get(str(namespace.id))


def _member_grants(user: Any, organization: Organization) -> dict[str, KeyRole]:
    """A member's per-namespace roles in `organization` (one query over guardian's direct-FK table)."""
    held: dict[str, set[str]] = {}
    rows = NamespaceUserPermission.objects.filter(
        user=user, content_object__organization=organization
    ).values_list("content_object_id", "permission__codename")
    for namespace_id, codename in rows:
        held.setdefault(str(namespace_id), set()).add(codename)
    grants = {}
    for held_id, codenames in held.items():
        role = roles.role_from_permissions(codenames)
        if role is not None:
            grants[held_id] = role
    return grants


def actor_for_user(user: Any, organization_slug: str | None = None) -> Actor | None:
    """The person acting in the named organisation, or in their first one; None if not a member."""
    memberships = (
        Membership.objects.filter(user=user).select_related("organization").order_by("created_at", "id")
    )
    if organization_slug:
        memberships = memberships.filter(organization__slug=organization_slug)
    membership = memberships.first()
    if membership is None:
        return None
    role = OrgRole(membership.role)
    grants = {} if role in roles.ORG_ADMINS else _member_grants(user, membership.organization)
    return Actor(organization=membership.organization, user=user, org_role=role, _grants=grants)


def actor_for_key(principal: Principal) -> Actor:
    """The API key acting in its organisation."""
    return Actor(organization=Organization.objects.get(pk=principal.organization_id), key=principal)


# --- namespaces --------------------------------------------------------------------------------


def namespace_get(actor: Actor, namespace_id: Any) -> Namespace:
    """The namespace with `namespace_id` (any value a request carried) if the actor has a role on it.

    Raises:
        NotFound: missing, deleted, another organisation's, or none of the actor's.
    """
    try:
        namespace = Namespace.objects.filter(pk=namespace_id, organization=actor.organization).first()
    except (ValueError, TypeError, ValidationError):
        namespace = None
    if namespace is None or actor.namespace_role(namespace) is None:
        raise NotFound("namespace not found")
    return namespace


def namespace_list(actor: Actor) -> list[tuple[Namespace, KeyRole]]:
    """The namespaces the actor has a role on, by name, with that role."""
    found = []
    for namespace in Namespace.objects.filter(organization=actor.organization).order_by("name"):
        role = actor.namespace_role(namespace)
        if role is not None:
            found.append((namespace, role))
    return found


# --- members, invitations, keys ------------------------------------------------------------------


def membership_get(actor: Actor, membership_id: Any) -> Membership:
    """A membership of the actor's organisation.

    Raises:
        NotFound: missing or another organisation's.
    """
    try:
        membership = (
            Membership.objects.select_related("user")
            .filter(pk=int(str(membership_id)), organization=actor.organization)
            .first()
        )
    except ValueError:
        membership = None
    if membership is None:
        raise NotFound("member not found")
    return membership


def invitation_get(actor: Actor, invitation_id: Any) -> Invitation:
    """A pending or past invitation of the actor's organisation.

    Raises:
        NotFound: missing or another organisation's.
    """
    try:
        invitation = Invitation.objects.filter(pk=invitation_id, organization=actor.organization).first()
    except (ValueError, TypeError, ValidationError):
        invitation = None
    if invitation is None:
        raise NotFound("invitation not found")
    return invitation


def apikey_visible(actor: Actor, key: ApiKey) -> bool:
    """Organisation owners and admins see every key of the organisation; a member sees the keys they
    created and those whose every namespace they administer. Keys see no keys."""
    if actor.user is None or key.organization_id != actor.organization.id:
        return False
    if actor.is_org_admin or key.created_by_id == getattr(actor.user, "pk", None):
        return True
    namespaces = list(key.namespaces.all())
    return bool(namespaces) and all(actor.namespace_role(n) == KeyRole.ADMIN for n in namespaces)


def apikey_list(actor: Actor) -> list[ApiKey]:
    """The organisation's keys the actor may see, newest first."""
    keys = (
        ApiKey.objects.filter(organization=actor.organization)
        .select_related("created_by")
        .prefetch_related("namespaces")
        .order_by("-created_at")
    )
    return [k for k in keys if apikey_visible(actor, k)]


def apikey_get(actor: Actor, key_id: Any) -> ApiKey:
    """A key the actor may see.

    Raises:
        NotFound: missing, another organisation's, or not visible to the actor.
    """
    try:
        key = (
            ApiKey.objects.select_related("organization", "created_by")
            .prefetch_related("namespaces")
            .filter(pk=key_id, organization=actor.organization)
            .first()
        )
    except (ValueError, TypeError, ValidationError):
        key = None
    if key is None or not apikey_visible(actor, key):
        raise NotFound("API key not found")
    return key
