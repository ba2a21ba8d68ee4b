"""Who is looking at the console, and which namespaces they may see.

In production every page needs a signed-in person; they see the namespaces their roles reach, in each
organisation they belong to (tenants/access.py, the same role table as the gRPC and REST APIs). In
`perdura dev` without `--require-auth`, a browser on loopback acts as the operator and sees every
namespace, as unauthenticated loopback gRPC calls do. A namespace outside what the viewer may see answers
404, like one that does not exist, so another tenant's URLs reveal nothing.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest
from perdura import env

from tenants import access
from tenants.models import Membership, Namespace
from tenants.roles import KeyRole


@dataclass(frozen=True, slots=True)
class Viewer:
    """The person (or the dev operator) behind a request, and the namespaces they may see by name."""

    label: str
    namespaces: dict[str, tuple[Namespace, KeyRole]]
    operator: bool = False
    """The loopback operator of `perdura dev` (no sign-in, every namespace)."""
    user_id: int | None = None
    """The signed-in account (None for the dev operator)."""

    @property
    def person(self) -> str:
        """Who the console's remembered settings belong to (frontend/models.py)."""
        return f"user:{self.user_id}" if self.user_id is not None else "operator"

    def namespace(self, name: str) -> tuple[Namespace, KeyRole]:
        """The namespace called `name` and the viewer's role on it.

        Raises:
            Http404: missing, deleted or not the viewer's (the same answer).
        """
        found = self.namespaces.get(name)
        if found is None:
            raise Http404("namespace not found")
        return found


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _loopback_host(host: str) -> bool:
    """The page was asked for by a loopback name. A page of another site whose name an attacker points
    at 127.0.0.1 (DNS rebinding) reaches the dev server from loopback too, but with its own name in Host;
    without this check it could read the operator's console."""
    name = host[1:].partition("]")[0] if host.startswith("[") else host.rpartition(":")[0] or host
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def dev_operator_allowed(*, address: str, host: str) -> bool:
    """True in `perdura dev` without `--require-auth`, for a browser on loopback (`address`, the peer) that
    names a loopback host (`host`, the Host header)."""
    return (
        env.dev_mode() and settings.PERDURA_AUTH == "loopback" and _loopback(address) and _loopback_host(host)
    )


def viewer_of(*, user: Any, address: str, host: str) -> Viewer | None:
    """The viewer behind a page request or a websocket (the same rules for both), or None when they must
    sign in. `user` is Django's (anonymous when nobody signed in)."""
    if user is not None and user.is_authenticated:
        namespaces: dict[str, tuple[Namespace, KeyRole]] = {}
        slugs = Membership.objects.filter(user=user).order_by("created_at", "id")
        for slug in slugs.values_list("organization__slug", flat=True):
            actor = access.actor_for_user(user, slug)
            if actor is None:
                continue
            for namespace, role in access.namespace_list(actor):
                namespaces[namespace.name] = (namespace, role)
        return Viewer(label=user.get_username(), namespaces=namespaces, user_id=user.pk)
    if dev_operator_allowed(address=address, host=host):
        everything = Namespace.objects.exclude(state=Namespace.State.DELETED).order_by("name")
        return Viewer(
            label="operator (dev)", namespaces={n.name: (n, KeyRole.ADMIN) for n in everything}, operator=True
        )
    return None


def viewer_for(request: HttpRequest) -> Viewer | None:
    """The viewer of this request, or None when they must sign in."""
    return viewer_of(
        user=getattr(request, "user", None),
        address=request.META.get("REMOTE_ADDR") or "",
        host=request.META.get("HTTP_HOST", ""),
    )
