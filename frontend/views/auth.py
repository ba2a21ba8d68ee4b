"""Sign in and out of the console with the accounts of the REST API (Django users, tenants/services/).

Attempts count against the same throttles as `POST /api/v1/auth/login/` (per address and per account, in
the shared `throttle` cache), so the console is no way around them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.contrib.auth import authenticate, login, logout
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST
from rest_framework.throttling import SimpleRateThrottle

from tenants.rest import throttles

log = logging.getLogger("perdura.console")


@dataclass
class _Attempt:
    """What DRF's throttles read of a request: its META and headers (source address) and data (the email)."""

    META: dict  # noqa: N815 - the attribute name DRF reads
    headers: object
    data: dict = field(default_factory=dict)


def throttle_wait(
    request: HttpRequest, checks: list[SimpleRateThrottle], data: dict | None = None
) -> float | None:
    """Seconds to wait when this attempt is over one of the REST API's `checks`, else None (the attempt
    is counted, in the same buckets as the REST API's)."""
    attempt = _Attempt(META=request.META, headers=request.headers, data=data or {})
    for throttle in checks:
        if not throttle.allow_request(attempt, None):  # type: ignore[arg-type]  # DRF reads these fields
            return throttle.wait() or 60.0
    return None


def _throttled(request: HttpRequest, email: str) -> float | None:
    """Seconds to wait when this attempt is over a login limit, else None (the attempt is counted)."""
    return throttle_wait(
        request, [throttles.LoginThrottle(), throttles.LoginAccountThrottle()], {"email": email}
    )


def _next(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return reverse("console-home")


@require_http_methods(["GET", "POST"])
def login_page(request: HttpRequest) -> HttpResponse:
    error = ""
    status = 200
    email = ""
    if request.method == "POST":
        email = request.POST.get("email", "").strip().lower()
        wait = _throttled(request, email)
        if wait is not None:
            error, status = f"Too many attempts; try again in {int(wait) + 1} seconds.", 429
        else:
            user = authenticate(request, username=email, password=request.POST.get("password", ""))
            if user is not None:
                login(request, user)
                return HttpResponseRedirect(_next(request))
            log.info("failed console login from %s", request.META.get("REMOTE_ADDR"))
            error, status = "Wrong email or password.", 400
    context = {"error": error, "email": email, "next": _next(request)}
    return render(request, "frontend/login.html", context, status=status)


@require_POST
def logout_page(request: HttpRequest) -> HttpResponse:
    logout(request)
    return HttpResponseRedirect(reverse("console-login"))
