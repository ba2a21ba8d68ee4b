"""Throttles: each organisation's REST requests (the rate limiter's token buckets), and the anonymous
account endpoints (login, sign-up, password reset), counted in the `throttle` cache (Redis outside
dev, so every web replica shares the counts)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.cache import BaseCache, caches
from perdura import metrics, ratelimit
from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from tenants import quotas
from tenants.models import Organization
from tenants.rest.permissions import actor_of

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView

organization_label = metrics.NamespaceLabels()
"""Organisation slugs as label values, bounded and switched off as namespace names are."""


def limiter() -> ratelimit.SyncLimiter:
    """This process's limiter: the same store (PERDURA_RATE_LIMITS) and key prefix as the gRPC API's."""
    return ratelimit.shared_sync(
        settings.PERDURA_RATE_LIMITS,
        redis_url=settings.PERDURA_REDIS_URL,
        prefix=f"perdura:rl:{settings.DATABASES['default']['NAME']}:",
    )


class OrganizationThrottle(BaseThrottle):
    """Every authenticated REST request takes a token from its organisation's bucket (PERDURA_RATE_REST a
    second, two seconds' worth at once), whether a person or a key makes it: one tenant's script cannot
    hold the web workers every other tenant shares. An empty bucket answers 429 with Retry-After."""

    def allow_request(self, request: Request, view: APIView) -> bool:
        user = request.user
        actor = actor_of(request) if user is not None and user.is_authenticated else None
        if actor is None:
            return True  # anonymous views carry their own throttles
        refused = organization_refusal(actor.organization)
        if refused is None:
            return True
        wait, detail = refused
        raise exceptions.Throttled(wait=wait, detail=detail)


def organization_refusal(organization: Organization) -> tuple[float, str] | None:
    """Take one token from the organisation's bucket of requests (the REST API's and the console's
    organisation pages'): None when there was one, else (seconds to wait, the refusal's message)."""
    rate = quotas.rest_rate()
    decision = limiter().check(f"org:{organization.id}:rest", rate)
    if decision.allowed:
        return None
    metrics.rest_rate_limit_refusals.labels(organization_label(organization.slug)).inc()
    return decision.retry_after, (
        f"Organisation rate limit exceeded: organisation {organization.slug!r} allows "
        f"{rate.per_second:g} REST API requests per second."
    )


class _Throttle(SimpleRateThrottle):
    @property
    def cache(self) -> BaseCache:  # type: ignore[override]  # DRF's class attribute, read per thread as Django's caches are
        return caches["throttle"]

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class LoginThrottle(_Throttle):
    """Login attempts per source address."""

    scope = "login"


class LoginAccountThrottle(_Throttle):
    """Login attempts per account, from any address (against distributed guessing of one password)."""

    scope = "login_account"

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        email = str(request.data.get("email", "")).strip().lower() if hasattr(request, "data") else ""
        if not email:
            return None
        return self.cache_format % {"scope": self.scope, "ident": hashlib.sha256(email.encode()).hexdigest()}


class SignupThrottle(_Throttle):
    scope = "signup"


class PasswordResetThrottle(_Throttle):
    """Reset requests, confirmations and invitation acceptances per source address."""

    scope = "password_reset"
