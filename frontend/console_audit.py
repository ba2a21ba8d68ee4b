"""Who the audit log names for a console action: the signed-in person (their id and email), or the
operator of `perdura dev`'s loopback allowance, with the browser's address and `console` as the way in."""

from __future__ import annotations

from django.http import HttpRequest

from frontend.viewer import Viewer
from tenants import audit

VIA = "console"


def context_for(request: HttpRequest, viewer: Viewer) -> audit.AuditContext:
    """The audit context of `viewer`'s request."""
    actor = audit.operator_actor("loopback") if viewer.operator else audit.user_actor(request.user)
    return audit.AuditContext(actor=actor, source=request.META.get("REMOTE_ADDR") or "", via=VIA)


def context_of(request: HttpRequest) -> audit.AuditContext:
    """The audit context of a request whose viewer was admitted (frontend.viewer): the signed-in person,
    or, without a session, the loopback operator (the viewer admits no one else without one)."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        actor = audit.user_actor(user)
    else:
        actor = audit.operator_actor("loopback")
    return audit.AuditContext(actor=actor, source=request.META.get("REMOTE_ADDR") or "", via=VIA)
