"""Account pages: sign up and confirm, password reset, accepting an invitation.

Each page is a form over the REST API's own serializer, throttle and service (tenants/rest/,
tenants/services/): the same validation, the same limits per address and the same answers. Sign-up
answers alike whether or not the email has an account, as `POST /api/v1/auth/signup/` does.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from frontend.tenant_views.pages import ORG_SESSION_KEY, public_page, validated
from frontend.views.auth import throttle_wait
from tenants import selectors
from tenants.errors import OrganizationAlreadyExists, TenantError
from tenants.rest import serializers as s
from tenants.rest import throttles
from tenants.services import invitations, people, signup

log = logging.getLogger("perdura.console")

_BACKEND = "django.contrib.auth.backends.ModelBackend"


def _too_many(wait: float) -> str:
    return f"Too many attempts; try again in {int(wait) + 1} seconds."


def _form(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    return render(request, f"frontend/tenant/{template}", context, status=status)


@public_page("GET", "POST")
def signup_page(request: HttpRequest) -> HttpResponse:
    """`/signup/`: email, password and organisation; then "check your email", whoever asked."""
    values = {k: request.POST.get(k, "") for k in ("email", "organization", "organization_name")}
    if request.method == "GET":
        return _form(request, "signup.html", {"values": values, "errors": {}})
    data, errors = validated(s.SignupIn, request.POST)
    status = 400
    if not errors:
        wait = throttle_wait(request, [throttles.SignupThrottle()])
        if wait is not None:
            errors, status = {"form": _too_many(wait)}, 429
        else:
            try:
                signup.signup(
                    email=data["email"],
                    password=data["password"],
                    organization_slug=data["organization"],
                    organization_name=data["organization_name"],
                )
            except TenantError as e:
                field = "organization" if isinstance(e, OrganizationAlreadyExists) else "form"
                errors = {field: str(e)}
            else:
                log.info("console sign-up for organisation %s", data["organization"])
                return _form(request, "signup_sent.html", {"email": data["email"]}, status=202)
    return _form(request, "signup.html", {"values": values, "errors": errors}, status=status)


@public_page("GET", "POST")
def signup_confirm_page(request: HttpRequest) -> HttpResponse:
    """`/signup/confirm/?token=`: the emailed link; its button creates the organisation and signs in.

    Opening the link changes nothing (mail scanners open links): the POST does.
    """
    token = request.POST.get("token") or request.GET.get("token", "")
    if request.method == "GET":
        return _form(request, "signup_confirm.html", {"token": token, "error": ""})
    wait = throttle_wait(request, [throttles.PasswordResetThrottle()])
    if wait is not None:
        return _form(request, "signup_confirm.html", {"token": token, "error": _too_many(wait)}, 429)
    try:
        membership = signup.signup_confirm(token=token)
    except TenantError as e:
        return _form(request, "signup_confirm.html", {"token": "", "error": str(e)}, 400)
    login(request, membership.user, backend=_BACKEND)
    request.session[ORG_SESSION_KEY] = membership.organization.slug
    return HttpResponseRedirect(reverse("console-namespaces") + "?welcome=1")


@public_page("GET", "POST")
def password_reset_page(request: HttpRequest) -> HttpResponse:
    """`/password-reset/`: mails a link when the address has an account; the same answer otherwise."""
    if request.method == "GET":
        return _form(request, "password_reset.html", {"error": "", "sent": False})
    data, errors = validated(s.PasswordResetIn, request.POST)
    if errors:
        return _form(request, "password_reset.html", {"error": errors.get("email", ""), "sent": False}, 400)
    wait = throttle_wait(request, [throttles.PasswordResetThrottle()])
    if wait is not None:
        return _form(request, "password_reset.html", {"error": _too_many(wait), "sent": False}, 429)
    people.password_reset_request(email=data["email"])
    return _form(request, "password_reset.html", {"error": "", "sent": True}, 202)


@public_page("GET", "POST")
def password_reset_confirm_page(request: HttpRequest) -> HttpResponse:
    """`/password-reset/confirm/?uid=&token=`: choose a new password (single use)."""
    link = {k: request.POST.get(k) or request.GET.get(k, "") for k in ("uid", "token")}
    if request.method == "GET":
        return _form(request, "password_reset_confirm.html", {**link, "error": ""})
    data, errors = validated(s.PasswordResetConfirmIn, request.POST)
    if errors:
        message = "; ".join(errors.values())
        return _form(request, "password_reset_confirm.html", {**link, "error": message}, 400)
    wait = throttle_wait(request, [throttles.PasswordResetThrottle()])
    if wait is not None:
        return _form(request, "password_reset_confirm.html", {**link, "error": _too_many(wait)}, 429)
    try:
        people.password_reset_confirm(uid=data["uid"], token=data["token"], password=data["password"])
    except TenantError as e:
        return _form(request, "password_reset_confirm.html", {**link, "error": str(e)}, 400)
    return HttpResponseRedirect(reverse("console-login") + "?reset=1")


@public_page("GET", "POST")
def invitation_accept_page(request: HttpRequest) -> HttpResponse:
    """`/invitations/accept/?token=`: who invites whom, and a password (a new one, or the account's)."""
    token = request.POST.get("token") or request.GET.get("token", "")
    invitation = selectors.invitation_find(token=token) if token else None
    context: dict[str, Any] = {"token": token, "invitation": invitation, "error": ""}
    if invitation is None:
        context["error"] = "This invitation is not valid (unknown, used, revoked or expired)."
        return _form(request, "invitation_accept.html", context, 404)
    if request.method == "GET":
        return _form(request, "invitation_accept.html", context)
    data, errors = validated(s.InvitationAcceptIn, request.POST)
    if errors:
        context["error"] = "; ".join(errors.values())
        return _form(request, "invitation_accept.html", context, 400)
    wait = throttle_wait(request, [throttles.PasswordResetThrottle()])
    if wait is not None:
        context["error"] = _too_many(wait)
        return _form(request, "invitation_accept.html", context, 429)
    try:
        membership = invitations.invitation_accept(token=data["token"], password=data["password"])
    except TenantError as e:
        context["error"] = str(e)
        return _form(request, "invitation_accept.html", context, 400)
    login(request, membership.user, backend=_BACKEND)
    request.session[ORG_SESSION_KEY] = membership.organization.slug
    return HttpResponseRedirect(reverse("console-namespaces"))
