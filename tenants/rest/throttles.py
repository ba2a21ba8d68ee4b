"""Throttles of the anonymous account endpoints (login, sign-up, password reset), counted in the
`throttle` cache (Redis outside dev, so every web replica shares the counts)."""

from __future__ import annotations

import hashlib

from django.core.cache import caches
from rest_framework.throttling import SimpleRateThrottle


class _Throttle(SimpleRateThrottle):
    @property
    def cache(self):  # noqa: D102  (per thread, like Django's caches)
        return caches["throttle"]

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class LoginThrottle(_Throttle):
    """Login attempts per source address."""

    scope = "login"


class LoginAccountThrottle(_Throttle):
    """Login attempts per account, from any address (against distributed guessing of one password)."""

    scope = "login_account"

    def get_cache_key(self, request, view) -> str | None:
        email = str(request.data.get("email", "")).strip().lower() if hasattr(request, "data") else ""
        if not email:
            return None
        return self.cache_format % {"scope": self.scope, "ident": hashlib.sha256(email.encode()).hexdigest()}


class SignupThrottle(_Throttle):
    scope = "signup"


class PasswordResetThrottle(_Throttle):
    """Reset requests, confirmations and invitation acceptances per source address."""

    scope = "password_reset"
