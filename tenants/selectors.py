"""Control-plane reads: namespaces (cached briefly per process because every RPC resolves one),
organisations, members, invitations and API keys.

Reads on behalf of an actor that must not see other tenants' objects go through tenants/access.py,
which answers NotFound alike for missing and forbidden; these take the organisation they read in.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from typing import Any

from django.db.models import QuerySet
from perdura import clock

from tenants import api_keys, roles
from tenants.models import ApiKey, Invitation, Membership, Namespace, NamespaceUserPermission, Organization
from tenants.roles import KeyRole

_TTL_SECONDS = 5.0
_cache: dict[str, tuple[float, Namespace]] = {}
_lock = threading.Lock()


def namespace_cached(name: str) -> Namespace | None:
    """The namespace called `name` if this process read it in the last few seconds, else None; no I/O, so
    an event loop can ask before it hands the read to a database thread."""
    hit = _cache.get(name)
    return hit[1] if hit is not None and time.monotonic() - hit[0] < _TTL_SECONDS else None


def namespace_by_name(name: str) -> Namespace | None:
    """The namespace called `name`, or None (cached for a few seconds)."""
    hit = namespace_cached(name)
    if hit is not None:
        return hit
    now = time.monotonic()
    namespace = Namespace.objects.filter(name=name).first()
    if namespace is not None:
        with _lock:
            _cache[name] = (now, namespace)
    return namespace


def namespace_forget(name: str) -> None:
    """Drop `name` from this process's cache after a change (other processes see it within seconds)."""
    with _lock:
        _cache.pop(name, None)


def namespace_list(*, names: frozenset[str] | None = None) -> list[Namespace]:
    """All namespaces by name, or only those in `names`."""
    query = Namespace.objects.order_by("name")
    if names is not None:
        query = query.filter(name__in=names)
    return list(query)


def namespace_in_organization(*, organization: Organization | None, name: str) -> Namespace | None:
    """The namespace called `name` if it belongs to `organization` (None: the operator's own), or None."""
    return Namespace.objects.filter(name=name, organization=organization).first()


def namespace_of_organization(*, organization: Organization, namespace_id: uuid.UUID) -> Namespace | None:
    """The namespace with `namespace_id` if it belongs to `organization`, or None (whatever its state)."""
    return Namespace.objects.filter(pk=namespace_id, organization=organization).first()


def namespace_grants(namespace: Namespace) -> dict[int, KeyRole]:
    """The per-namespace roles granted to people on `namespace`, by user id."""
    held: dict[int, set[str]] = {}
    for user_id, codename in NamespaceUserPermission.objects.filter(content_object=namespace).values_list(
        "user_id", "permission__codename"
    ):
        held.setdefault(user_id, set()).add(codename)
    return {
        user_id: role
        for user_id, codenames in held.items()
        if (role := roles.role_from_permissions(codenames)) is not None
    }


def namespace_access_list(*, organization: Organization, namespace: Namespace) -> list[dict[str, Any]]:
    """Who has a role on `namespace` of `organization`: each member with one (owners and admins are
    admin everywhere), in the order they joined, as {member, email, role}."""
    grants = namespace_grants(namespace)
    members = Membership.objects.filter(organization=organization).select_related("user")
    rows = []
    for m in members.order_by("created_at", "id"):
        role = "admin" if m.role in ("owner", "admin") else grants.get(m.user_id)
        if role is not None:
            rows.append({"member": m.id, "email": m.user.email, "role": str(role)})
    return rows


def organization_by_slug(slug: str) -> Organization | None:
    """The organisation called `slug`, or None."""
    return Organization.objects.filter(slug=slug).first()


def membership_list_of_user(*, user: Any) -> QuerySet[Membership]:
    """The person's memberships, with their organisations."""
    return Membership.objects.filter(user=user).select_related("organization")


def member_list(*, organization: Organization) -> QuerySet[Membership]:
    """The organisation's members with their users, in the order they joined."""
    return (
        Membership.objects.filter(organization=organization)
        .select_related("user")
        .order_by("created_at", "id")
    )


def invitation_list(*, organization: Organization) -> QuerySet[Invitation]:
    """The organisation's invitations, newest first (pending, accepted, revoked and expired)."""
    return Invitation.objects.filter(organization=organization).order_by("-created_at")


def invitation_token_hash(token: str) -> str:
    """What an invitation keeps of its token (the token itself goes by email only)."""
    return hashlib.sha256(token.encode()).hexdigest()


def invitation_find(*, token: str) -> Invitation | None:
    """The open invitation with `token` (not accepted, revoked or expired), or None."""
    invitation = (
        Invitation.objects.select_related("organization")
        .filter(token_hash=invitation_token_hash(token))
        .first()
    )
    if invitation is None or invitation.accepted_at or invitation.revoked_at:
        return None
    if invitation.expires_at <= clock.now():
        return None
    return invitation


def apikey_find(value: str) -> ApiKey | None:
    """The key named by `value`: the whole key (verified) or its prefix (`pdk_<prefix>` or bare)."""
    prefix = api_keys.parse_prefix(value)
    if prefix is None:
        return None
    key = ApiKey.objects.select_related("organization").filter(prefix=prefix).first()
    parsed = api_keys.parse(value)
    if key is not None and parsed is not None and not api_keys.verify(parsed.plaintext, key.secret_hash):
        return None
    return key


def apikey_list(*, organization: Organization) -> list[ApiKey]:
    """An organisation's keys, newest first, with their namespaces."""
    return list(
        ApiKey.objects.filter(organization=organization)
        .prefetch_related("namespaces")
        .order_by("-created_at")
    )
