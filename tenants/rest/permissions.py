"""What each REST view needs: every view declares a `Need` per HTTP method, and `Declared` enforces it.

Like engine/api/methods.py for the gRPC API, the declaration is data a test reads: it fails when a
view of /api/v1/ leaves a method undeclared. Undeclared methods are refused (fail closed).
Namespace needs (READ, WRITE, ADMIN) are checked again on the object by the view
(`check_object_permissions`), whose fetch answers 404 for namespaces outside the caller's reach.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from rest_framework import exceptions, permissions

from tenants import access, roles
from tenants.models import Namespace
from tenants.rest.authentication import KeyUser
from tenants.roles import Access

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView

ORG_HEADER = "HTTP_X_PERDURA_ORGANIZATION"


class Need(enum.Enum):
    PUBLIC = "public"
    """Anyone (sign-up, login, password reset, accepting an invitation)."""
    MEMBER = "member"
    """A person or an API key of the organisation."""
    PERSON = "person"
    """A person of the organisation (not an API key); the service checks the rest (e.g. key roles)."""
    ORG_ADMIN = "org_admin"
    """An owner or admin of the organisation."""
    NAMESPACE_CREATE = "namespace_create"
    """An owner or admin of the organisation, or an admin API key (as RegisterNamespace)."""
    NAMESPACE_READ = "namespace_read"
    """Reader role or above on the namespace in the URL."""
    NAMESPACE_WRITE = "namespace_write"
    """Operator role or above on the namespace in the URL."""
    NAMESPACE_ADMIN = "namespace_admin"
    """Admin role on the namespace in the URL."""


_NAMESPACE_ACCESS = {
    Need.NAMESPACE_READ: Access.READ,
    Need.NAMESPACE_WRITE: Access.WRITE,
    Need.NAMESPACE_ADMIN: Access.ADMIN,
}


def need_of(view: object, method: str) -> Need | None:
    """The need `view` declares for `method` (HEAD and OPTIONS as GET)."""
    declared = getattr(view, "needs", None) or {}
    method = "GET" if method in ("HEAD", "OPTIONS") else method
    return declared.get(method)


def actor_of(request: Request) -> access.Actor | None:
    """The request's actor (resolved once): a key, or a person in the organisation named by the
    `X-Perdura-Organization` header (default: their first)."""
    if hasattr(request, "_perdura_actor"):
        return request._perdura_actor
    user = request.user
    actor = None
    if isinstance(user, KeyUser):
        actor = access.actor_for_key(user.principal)
    elif user is not None and user.is_authenticated:
        actor = access.actor_for_user(user, request.META.get(ORG_HEADER) or None)
    request._perdura_actor = actor  # type: ignore[attr-defined]  # the request's own memo of its actor
    return actor


def need_refusal(actor: access.Actor, need: Need) -> str | None:
    """Why `actor` may not do what `need` asks, as a 403's message, or None when it may.

    The one check of organisation-level needs, for the REST views (`Declared`) and the console's pages
    (frontend/tenant_views/) alike. Namespace needs pass here and are checked on the namespace by
    `namespace_refusal`.
    """
    if need is Need.PERSON:
        if actor.user is None:
            return "this needs a person signed in, not an API key"
    elif need is Need.ORG_ADMIN:
        if not actor.is_org_admin:
            return "this needs an owner or admin of the organisation"
    elif need is Need.NAMESPACE_CREATE and not (
        actor.is_org_admin or (actor.key is not None and actor.key.role == roles.KeyRole.ADMIN)
    ):
        return "creating namespaces needs an owner or admin of the organisation, or an admin API key"
    return None


def namespace_refusal(actor: access.Actor, namespace: Namespace, need: Need) -> str | None:
    """Why `actor` may not do what the namespace `need` asks on `namespace` (a 403's message), or None.

    Raises:
        access.NotFound: the actor has no role on the namespace (answered as a namespace that does not exist).
    """
    wanted = _NAMESPACE_ACCESS.get(need)
    if wanted is None:
        return None
    role = actor.namespace_role(namespace)
    if role is None:
        raise access.NotFound("namespace not found")
    if roles.key_access(role) < wanted:
        return f"this needs the {roles.least_role_for(wanted).value} role on {namespace.name}; you are {role.value}"
    return None


class Declared(permissions.BasePermission):
    """Enforces the view's declared needs."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        need = need_of(view, request.method or "")
        if need is None:
            return False
        if need is Need.PUBLIC:
            return True
        if not request.user or not request.user.is_authenticated:
            raise exceptions.NotAuthenticated()
        actor = actor_of(request)
        if actor is None:
            raise exceptions.PermissionDenied("you are not a member of this organisation")
        refused = need_refusal(actor, need)
        if refused is not None:
            raise exceptions.PermissionDenied(refused)
        return True

    def has_object_permission(self, request: Request, view: APIView, obj: Namespace) -> bool:
        need = need_of(view, request.method or "")
        if need is None or need not in _NAMESPACE_ACCESS:
            return True
        actor = actor_of(request)
        if actor is None:  # has_permission refused it already
            raise exceptions.NotAuthenticated()
        try:
            refused = namespace_refusal(actor, obj, need)
        except access.NotFound:
            raise exceptions.NotFound("namespace not found") from None
        if refused is not None:
            raise exceptions.PermissionDenied(refused)
        return True
