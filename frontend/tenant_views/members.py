"""`/organization/members`: members and their organisation roles, invitations (send, revoke, resend) and
each member's role on each namespace as a grid.

The REST API's rules through its services: owners and admins manage members and invitations, only owners
make or unmake owners, the last owner stays (tenants/services/members.py); a namespace's roles are given
by its admins (`namespace_grant`, whose keys fit their creator's new role in the same transaction).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from perdura import clock

from frontend.tenant_views.pages import OrgPage, org_page, validated
from tenants import access, roles, selectors
from tenants.errors import Forbidden, TenantError
from tenants.rest import serializers as s
from tenants.rest.permissions import Need
from tenants.roles import OrgRole
from tenants.services import invitations, members, namespaces

NO_ROLE = ""


def _org_roles_offered(page: OrgPage) -> list[str]:
    """The organisation roles this person may hand out (only owners make owners)."""
    return [
        r.value
        for r in OrgRole
        if page.actor.is_org_admin and (r != OrgRole.OWNER or page.actor.org_role == OrgRole.OWNER)
    ]


def _render(page: OrgPage, *, status: int = 200, **extra: Any) -> HttpResponse:
    actor = page.actor
    found = list(selectors.member_list(organization=actor.organization))
    owners = sum(1 for m in found if m.role == OrgRole.OWNER)
    offered = _org_roles_offered(page)
    spaces = [n for n, _ in access.namespace_list(actor)]
    administered = [n for n in spaces if page.can(Need.NAMESPACE_ADMIN, n)]
    grants = {n.id: selectors.namespace_grants(n) for n in administered}
    rows = []
    for m in found:
        org_admin = m.role in roles.ORG_ADMINS
        manageable = bool(offered) and (m.role != OrgRole.OWNER or actor.org_role == OrgRole.OWNER)
        rows.append(
            {
                "m": m,
                "is_you": m.user_id == getattr(actor.user, "pk", None),
                "may_change": manageable and not (m.role == OrgRole.OWNER and owners <= 1),
                "may_remove": manageable and not (m.role == OrgRole.OWNER and owners <= 1),
                "org_admin": org_admin,
                "cells": [
                    {
                        "ns": n,
                        "role": "admin" if org_admin else str(grants[n.id].get(m.user_id, NO_ROLE) or ""),
                    }
                    for n in administered
                ],
            }
        )
    pending = []
    if actor.is_org_admin:
        now = clock.now()
        for inv in selectors.invitation_list(organization=actor.organization):
            if inv.accepted_at is None and inv.revoked_at is None:
                pending.append({"inv": inv, "expired": inv.expires_at <= now, "may": inv.role in offered})
    context = page.context(
        rows=rows,
        namespaces=administered,
        offered=offered,
        key_roles=[r.value for r in roles.KeyRole],
        invitations=pending,
        errors=extra.pop("errors", {}),
        **extra,
    )
    return render(page.request, "frontend/tenant/members.html", context, status=status)


def _back(done: str) -> HttpResponse:
    return HttpResponseRedirect(reverse("console-members") + f"?done={done}")


def _failed(page: OrgPage, e: TenantError) -> HttpResponse:
    return _render(page, status=403 if isinstance(e, Forbidden) else 400, errors={"form": str(e)})


def _membership(page: OrgPage, member_id: str) -> Any:
    try:
        return access.membership_get(page.actor, member_id)
    except access.NotFound:
        raise Http404("member not found") from None


@org_page(GET=Need.PERSON)
def members_page(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """The members, their roles and, for owners and admins, the invitations."""
    return _render(page)


@org_page(POST=Need.ORG_ADMIN)
def member_role(request: HttpRequest, page: OrgPage, member_id: str) -> HttpResponse:
    """Change a member's organisation role (only owners make or unmake owners; the last owner stays)."""
    membership = _membership(page, member_id)
    data, errors = validated(s.MemberIn, request.POST)
    if errors:
        return _render(page, status=400, errors={"form": errors.get("role", "")})
    try:
        members.member_set_role(actor=page.actor, membership=membership, role=data["role"])
    except TenantError as e:
        return _failed(page, e)
    return _back("role")


@org_page(POST=Need.ORG_ADMIN)
def member_remove(request: HttpRequest, page: OrgPage, member_id: str) -> HttpResponse:
    """Remove a member: their namespace roles go and the keys they made are revoked."""
    try:
        members.member_remove(actor=page.actor, membership=_membership(page, member_id))
    except TenantError as e:
        return _failed(page, e)
    return _back("removed")


@org_page(POST=Need.PERSON)
def member_access(request: HttpRequest, page: OrgPage, member_id: str) -> HttpResponse:
    """One row of the grid: the member's role on each namespace the person administers (none: taken)."""
    membership = _membership(page, member_id)
    if membership.role in roles.ORG_ADMINS:
        return _render(page, status=400, errors={"form": "Owners and admins are admin on every namespace."})
    wanted: dict[Any, str] = {}
    for field in request.POST:
        if not field.startswith("ns-"):
            continue
        value = request.POST.get(field, "")
        try:
            namespace = access.namespace_get(page.actor, field.removeprefix("ns-"))
        except access.NotFound:
            raise Http404("namespace not found") from None
        if not page.can(Need.NAMESPACE_ADMIN, namespace):
            return _render(page, status=403, errors={"form": f"You do not administer {namespace.name}."})
        if value and value not in s.ROLE_CHOICES:
            return _render(page, status=400, errors={"form": f"Unknown role {value!r}."})
        wanted[namespace] = value
    changed = 0
    for namespace, value in wanted.items():
        current = selectors.namespace_grants(namespace).get(membership.user_id)
        if (str(current) if current else "") != value:
            namespaces.namespace_grant(namespace=namespace, user=membership.user, role=value or None)
            changed += 1
    return _back(f"access-{changed}")


@org_page(POST=Need.ORG_ADMIN)
def invitation_send(request: HttpRequest, page: OrgPage) -> HttpResponse:
    """Invite an address (the link goes by email only)."""
    data, errors = validated(s.InviteIn, request.POST)
    if errors:
        return _render(page, status=400, errors={"invite": "; ".join(errors.values())})
    try:
        invitations.invitation_create(actor=page.actor, email=data["email"], role=data["role"])
    except TenantError as e:
        return _render(page, status=403 if isinstance(e, Forbidden) else 400, errors={"invite": str(e)})
    return _back("invited")


def _invitation(page: OrgPage, invitation_id: str) -> Any:
    try:
        return access.invitation_get(page.actor, invitation_id)
    except access.NotFound:
        raise Http404("invitation not found") from None


@org_page(POST=Need.ORG_ADMIN)
def invitation_revoke(request: HttpRequest, page: OrgPage, invitation_id: str) -> HttpResponse:
    """Revoke an invitation: its link stops working."""
    try:
        invitations.invitation_revoke(actor=page.actor, invitation=_invitation(page, invitation_id))
    except TenantError as e:
        return _failed(page, e)
    return _back("revoked")


@org_page(POST=Need.ORG_ADMIN)
def invitation_resend(request: HttpRequest, page: OrgPage, invitation_id: str) -> HttpResponse:
    """Email a fresh link (the old one stops working)."""
    try:
        invitations.invitation_resend(actor=page.actor, invitation=_invitation(page, invitation_id))
    except TenantError as e:
        return _failed(page, e)
    return _back("resent")
