"""What every organisation page of the console does first: the person, their organisation, the need.

The console's tenant pages (accounts, namespaces, keys, members, audit) are a second transport over the
same services, selectors, validators and throttles as the REST API (tenants/). Each page declares the
`Need` of each HTTP method as the REST views do, and the same functions decide
(`tenants.rest.permissions.need_refusal`, `namespace_refusal`): nobody signed in is sent to sign in, a
namespace outside the person's reach answers 404, a need they lack 403. Templates show a control only
when `can` says its need is met, so a page offers nothing its person may not use.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from rest_framework.serializers import Serializer

from frontend.console_audit import VIA
from tenants import access, audit, selectors
from tenants.models import Namespace
from tenants.rest import throttles
from tenants.rest.permissions import Need, namespace_refusal, need_refusal
from tenants.roles import KeyRole

ORG_SESSION_KEY = "perdura_org"
"""The session's chosen organisation (its slug), set by the organisation switcher."""

Page = Callable[..., HttpResponseBase]


@dataclass(frozen=True, slots=True)
class OrgPage:
    """The person behind a request, acting in one of their organisations."""

    request: HttpRequest
    actor: access.Actor
    namespace: Namespace | None = None
    """The namespace of the URL, for namespace pages."""

    def can(self, need: Need, namespace: Namespace | None = None) -> bool:
        """True when the person meets `need` (on `namespace`, or the page's, for namespace needs)."""
        if need_refusal(self.actor, need) is not None:
            return False
        target = namespace or self.namespace
        if target is None:
            return True
        try:
            return namespace_refusal(self.actor, target, need) is None
        except access.NotFound:
            return False

    def context(self, **extra: Any) -> dict[str, Any]:
        """The base layout's context (switchers, who) plus `extra`."""
        user = self.actor.user
        memberships = selectors.membership_list_of_user(user=user)
        reached = access.namespace_list(self.actor)
        namespaces = [n.name for n, _ in reached]
        return {
            "org": self.actor.organization,
            "org_role": self.actor.org_role.value if self.actor.org_role else "",
            "organizations": [(m.organization.slug, m.organization.name, m.role) for m in memberships],
            "namespace": self.namespace.name if self.namespace else None,
            "namespace_names": namespaces,
            "viewer": {"label": user.get_username() if user is not None else "", "operator": False},
            "is_org_admin": self.actor.is_org_admin,
            "administers_any": self.actor.is_org_admin or any(role == KeyRole.ADMIN for _, role in reached),
            "page": self,
            **extra,
        }


def _login_redirect(request: HttpRequest) -> HttpResponse:
    return HttpResponseRedirect(reverse("console-login") + "?" + urlencode({"next": request.get_full_path()}))


def _refused(request: HttpRequest, status: int, message: str) -> HttpResponse:
    return render(
        request, "frontend/tenant/refused.html", {"status": status, "message": message}, status=status
    )


def actor_of(request: HttpRequest, organization_slug: str | None = None) -> access.Actor | None:
    """The signed-in person acting in `organization_slug`, else in the session's organisation, else in
    their first; None when they belong to none."""
    user = request.user
    if organization_slug:
        return access.actor_for_user(user, organization_slug)
    chosen = request.session.get(ORG_SESSION_KEY)
    return (access.actor_for_user(user, chosen) if chosen else None) or access.actor_for_user(user)


def _run(request: HttpRequest, page: OrgPage, view: Page, kwargs: dict[str, str]) -> HttpResponseBase:
    # Each request draws from the organisation's bucket, as every REST request of its people and keys
    # does: the console is no way around the limit.
    refused = throttles.organization_refusal(page.actor.organization)
    if refused is not None:
        wait, message = refused
        response = _refused(request, 429, message)
        response["Retry-After"] = str(max(1, math.ceil(wait)))
        return response
    # The page's changes are recorded as this person, from this address, through the console
    # (tenants/audit.py), as the REST views bind theirs.
    context = audit.AuditContext(
        actor=audit.user_actor(request.user), source=request.META.get("REMOTE_ADDR") or "", via=VIA
    )
    with audit.acting(context):
        return view(request, page, **kwargs)


def org_page(**needs: Need) -> Callable[[Page], Page]:
    """Declares what each HTTP method of an organisation page needs (`GET=Need.PERSON, POST=...`).

    The view runs as `view(request, page, **kwargs)`; undeclared methods answer 405.
    """

    def decorate(view: Page) -> Page:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, **kwargs: str) -> HttpResponseBase:
            need = needs.get("GET" if request.method == "HEAD" else (request.method or ""))
            if need is None:
                return HttpResponse(status=405, headers={"Allow": ", ".join(sorted(needs))})
            if not request.user.is_authenticated:
                return _login_redirect(request)
            actor = actor_of(request)
            if actor is None:
                return _refused(request, 404, "You belong to no organisation.")
            refused = need_refusal(actor, need)
            if refused is not None:
                return _refused(request, 403, refused)
            return _run(request, OrgPage(request=request, actor=actor), view, kwargs)

        wrapper.console_needs = needs  # type: ignore[attr-defined]  # read by the authorization test
        return wrapper

    return decorate


def namespace_page(**needs: Need) -> Callable[[Page], Page]:
    """Declares the needs of a page of the namespace in the URL (`namespace` keyword), acting in the
    namespace's organisation: 404 for a namespace outside the person's reach, 403 below the need."""

    def decorate(view: Page) -> Page:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, namespace: str, **kwargs: str) -> HttpResponseBase:
            need = needs.get("GET" if request.method == "HEAD" else (request.method or ""))
            if need is None:
                return HttpResponse(status=405, headers={"Allow": ", ".join(sorted(needs))})
            if not request.user.is_authenticated:
                return _login_redirect(request)
            found = selectors.namespace_by_name(namespace)
            organization = found.organization if found is not None else None
            actor = access.actor_for_user(request.user, organization.slug) if organization else None
            if found is None or actor is None:
                return _refused(request, 404, "Namespace not found.")
            try:
                refused = need_refusal(actor, need) or namespace_refusal(actor, found, need)
            except access.NotFound:
                return _refused(request, 404, "Namespace not found.")
            if refused is not None:
                return _refused(request, 403, refused)
            return _run(request, OrgPage(request=request, actor=actor, namespace=found), view, kwargs)

        wrapper.console_needs = needs  # type: ignore[attr-defined]  # read by the authorization test
        return wrapper

    return decorate


def public_page(*methods: str) -> Callable[[Page], Page]:
    """A page anyone may open (sign-up, password reset, invitations); other methods answer 405."""

    def decorate(view: Page) -> Page:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, **kwargs: str) -> HttpResponseBase:
            method = "GET" if request.method == "HEAD" else request.method
            if method not in methods:
                return HttpResponse(status=405, headers={"Allow": ", ".join(methods)})
            return view(request, **kwargs)

        wrapper.console_needs = dict.fromkeys(methods, Need.PUBLIC)  # type: ignore[attr-defined]
        return wrapper

    return decorate


def validated(serializer_class: type[Serializer], data: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The REST API's validation of `data`: (validated data, {} ) or ({}, field → first message)."""
    serializer = serializer_class(data=data)
    if serializer.is_valid():
        return dict(serializer.validated_data), {}
    return {}, dict(_messages(serializer.errors))


def _messages(errors: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    for field, value in errors.items():
        first = value[0] if isinstance(value, list) and value else value
        yield prefix + field, str(first)


@org_page(POST=Need.PERSON)
def organization_switch(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """The organisation switcher: the pages act in the chosen organisation (one the person belongs to)."""
    slug = request.POST.get("organization", "")
    if access.actor_for_user(request.user, slug) is None:
        return _refused(request, 404, "Organisation not found.")
    request.session[ORG_SESSION_KEY] = slug
    return HttpResponseRedirect(reverse("console-namespaces"))
