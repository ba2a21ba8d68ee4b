"""Invitations: an owner or admin invites an address into the organisation; the link goes by email only."""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from perdura import clock

from tenants import audit, selectors
from tenants.access import Actor
from tenants.errors import TenantError
from tenants.models import Invitation, Membership
from tenants.roles import OrgRole
from tenants.services import members, people

log = logging.getLogger("perdura.accounts")
INVITATION_LIFETIME = timedelta(days=7)


def invitation_create(*, actor: Actor, email: str, role: str) -> tuple[Invitation, str]:
    """Invite `email` into the actor's organisation with `role`, and email them the link.

    Returns the invitation and its token (sent by email only; the REST API never shows it).

    Raises:
        Forbidden: the actor is not an owner or admin, or an admin invites an owner.
        TenantError: bad email or role, or already a member.
    """
    role = members.org_role_parse(role)
    members.check_may_set_role(actor, role)
    email = people.normalise_email(email)
    if Membership.objects.filter(organization=actor.organization, user__username=email).exists():
        raise TenantError(f"{email} is already a member of {actor.organization.slug}")
    token = secrets.token_urlsafe(32)
    now = clock.now()
    with transaction.atomic():
        invitation = Invitation.objects.create(
            organization=actor.organization,
            email=email,
            role=role,
            token_hash=selectors.invitation_token_hash(token),
            invited_by=actor.user,
            created_at=now,
            expires_at=now + INVITATION_LIFETIME,
        )
        audit.record_change(
            action="invitation.create",
            target=f"invitation/{email}",
            organization=actor.organization,
            details={"role": role.value},
        )
    link = f"{settings.PERDURA_WEB_URL}/invitations/accept/?token={token}"
    body = (
        f"You are invited to join {actor.organization.name} ({actor.organization.slug}) on Perdura as {role}.\n\n"
        f"Accept within 7 days: {link}\n(POST the token with a password to /api/v1/invitations/accept/.)\n"
    )
    transaction.on_commit(
        lambda: send_mail(f"Join {actor.organization.slug} on Perdura", body, None, [email])
    )
    log.info("invitation %s to organisation %s by %s", invitation.id, actor.organization.slug, actor.label)
    return invitation, token


def invitation_accept(*, token: str, password: str) -> Membership:
    """Accept an invitation: the invited person (created, or with their existing password checked)
    joins the organisation with the invited role.

    Raises:
        TenantError: unknown, used, revoked or expired token; wrong or weak password.
    """
    with transaction.atomic():
        invitation = selectors.invitation_find(token=token)
        if invitation is not None:
            invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if invitation is None or invitation.accepted_at or invitation.revoked_at:
            raise TenantError("this invitation is not valid (unknown, used, revoked or expired)")
        user = people.user_by_email(invitation.email)
        pending = user is not None and people.pending_signup(user)
        if user is not None and user.has_usable_password() and not pending:
            if not user.check_password(password):
                raise TenantError("the password does not match the account of this email")
        else:
            user_model = get_user_model()
            people.check_password(
                password, user or user_model(username=invitation.email, email=invitation.email)
            )
            if user is None:
                user = user_model.objects.create_user(
                    username=invitation.email, email=invitation.email, password=password
                )
            else:
                # An unconfirmed sign-up's password was set by whoever signed up with this address; the
                # invitation, like the sign-up link, proves the address, so its password wins.
                user.set_password(password)
                user.is_active = user.is_active or pending
                user.save(update_fields=["password", "is_active"])
        # Accepting is the invited person's act, though they were anonymous when the request began.
        with audit.acting_as_user(user):
            audit.record_change(
                action="invitation.accept",
                target=f"invitation/{invitation.email}",
                organization=invitation.organization,
                details={"role": invitation.role},
            )
            membership = members.member_add(
                organization=invitation.organization, email=invitation.email, role=OrgRole(invitation.role)
            )
        Invitation.objects.filter(pk=invitation.pk).update(accepted_at=clock.now())
    return Membership.objects.select_related("organization", "user").get(pk=membership.pk)


def invitation_revoke(*, actor: Actor, invitation: Invitation) -> Invitation:
    """Revoke a pending invitation (its link stops working)."""
    members.check_may_set_role(actor, members.org_role_parse(invitation.role))
    if invitation.revoked_at is None and invitation.accepted_at is None:
        invitation.revoked_at = clock.now()
        with transaction.atomic():
            invitation.save(update_fields=["revoked_at"])
            audit.record_change(
                action="invitation.revoke",
                target=f"invitation/{invitation.email}",
                organization=actor.organization,
            )
    return invitation


def invitation_resend(*, actor: Actor, invitation: Invitation) -> tuple[Invitation, str]:
    """Send a pending (or expired) invitation again: the old link stops working and a new one, valid
    for another INVITATION_LIFETIME, is emailed (recorded as the revocation and a new invitation).

    Raises:
        Forbidden: see `invitation_create`.
        TenantError: the invitation was accepted, or the address has joined meanwhile.
    """
    if invitation.accepted_at is not None:
        raise TenantError(f"{invitation.email} has accepted this invitation")
    with transaction.atomic():
        invitation_revoke(actor=actor, invitation=invitation)
        return invitation_create(actor=actor, email=invitation.email, role=invitation.role)
