"""REST authentication: `Authorization: Bearer <API key>` (the keys of the gRPC API) or the session.

Failed key attempts are counted per source address; past the limit the source gets 429 until the
window ends, before any key is looked at.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.core.cache import caches
from django.http import HttpRequest
from perdura import metrics
from rest_framework import authentication, exceptions

from tenants import api_keys
from tenants.auth import AuthError, Principal, authenticate

if TYPE_CHECKING:
    from rest_framework.request import Request

log = logging.getLogger("perdura.rest")
FAILED_KEYS_PER_MINUTE = 20


class KeyUser:
    """`request.user` of a call made with an API key: authenticated, but no person."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    pk = id = None

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    def __str__(self) -> str:
        return self.principal.label


def client_address(request: HttpRequest | Request) -> str:
    """The caller's address (REMOTE_ADDR: put the web process behind a proxy that sets it)."""
    return request.META.get("REMOTE_ADDR", "") or "unknown"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer pdk_...`: the same keys, checks and answers as the gRPC API."""

    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return None
        cache = caches["throttle"]
        counter = f"keyfail:{client_address(request)}"
        if cache.get(counter, 0) >= FAILED_KEYS_PER_MINUTE:
            metrics.auth_failures.labels("rest", "throttled").inc()
            raise exceptions.Throttled(wait=60, detail="too many failed API key attempts; try again later")
        try:
            principal = authenticate(value)
        except AuthError as e:
            metrics.auth_failures.labels("rest", "invalid").inc()
            if not cache.add(counter, 1, timeout=60):
                try:
                    cache.incr(counter)
                except ValueError:
                    cache.set(counter, 1, timeout=60)
            prefix = api_keys.parse_prefix(value)
            log.info(
                "refused API key %s from %s",
                api_keys.display(prefix) if prefix else "(malformed)",
                client_address(request),
            )
            raise exceptions.AuthenticationFailed(str(e)) from None
        return KeyUser(principal), principal

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="perdura"'


class SessionAuthentication(authentication.SessionAuthentication):
    """Django's session (from /api/v1/auth/login/), with CSRF enforced on every unsafe method."""


from tenants.rest import schema  # noqa: E402, F401  (registers the schema extensions above)
