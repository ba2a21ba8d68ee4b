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
