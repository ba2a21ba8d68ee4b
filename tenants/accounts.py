"""People: sign-up, invitations, organisation roles, password resets, and keys created by a person.

Writes that the REST API makes on behalf of a person (tenants/access.Actor). The rules about who may
do what live here too, so any other transport (a console, a CLI) gets the same ones: only owners make
or unmake owners, the last owner stays, a key never exceeds its creator's role on its namespaces.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.hashers import make_password
from django.contrib.auth.tokens import default_token_generator
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.utils.encoding import force_bytes, force_str
from django.utils.http import urlsafe_base64_decode, urlsafe_base64_encode
from perdura import clock

from tenants import access, api_keys, audit, roles, services
from tenants.access import Actor
from tenants.models import ApiKey, Invitation, Membership, Namespace, NamespaceUserPermission, Organization
from tenants.roles import OrgRole
from tenants.services import TenantError

log = logging.getLogger("perdura.accounts")
INVITATION_LIFETIME = timedelta(days=7)


class Forbidden(TenantError):
    """The actor may see the object but not make this change (403)."""


def _normalise_email(email: str) -> str:
    email = email.strip().lower()
    local, at, domain = email.rpartition("@")
    if not at or not local or "." not in domain or " " in email:
        raise TenantError(f"{email!r} is not an email address")
    return email


def _check_password(password: str, user: object | None = None) -> None:
    try:
        password_validation.validate_password(password, user)
    except ValidationError as e:
        raise TenantError(" ".join(e.messages)) from None


def user_by_email(email: str) -> object | None:
    return get_user_model().objects.filter(username=email.strip().lower()).first()


# --- sign-up ---------------------------------------------------------------------------------


SIGNUP_LINK_LIFETIME = timedelta(days=2)
_SIGNUP_SALT = "perdura.signup"


def signup(*, email: str, password: str, organization_slug: str, organization_name: str = "") -> None:
    """Start a sign-up: email a confirmation link, or tell an existing account that someone tried.

    The answer (and its time) is the same whether or not the email has an account, as password reset's
    is, so sign-up cannot be used to find out who has one: everything that can fail is checked first
    and alike for both (email form, password strength, organisation name); then a new address gets a
    link that creates the organisation and signs them in (`signup_confirm`), and an address with an
    account gets an email saying so (log in, or reset the password). Both hash the password once.

    Raises:
        TenantError: bad email, weak password, invalid organisation name.
        OrganizationAlreadyExists: the organisation name is taken.
    """
    email = _normalise_email(email)
    user_model = get_user_model()
    _check_password(password, user_model(username=email, email=email))
    services.organization_check_free(slug=organization_slug)
    user = user_by_email(email)
    if user is not None and not _pending_signup(user):
        make_password(password)  # the work the other branch does, so the timing tells nothing
        send_mail(
            "Sign-up to Perdura",
            "Someone tried to sign up to Perdura with this email address, which already has an account.\n\n"
            f"If it was you, log in at {settings.PERDURA_WEB_URL}/api/v1/auth/login/, or choose a new password "
            f"at {settings.PERDURA_WEB_URL}/api/v1/auth/password-reset/.\n\nIf it was not you, ignore this email.\n",
            None,
            [email],
        )
        return
    with transaction.atomic():
        # Inactive until the link is followed (it cannot log in); a new sign-up replaces the password.
        if user is None:
            user = user_model.objects.create_user(username=email, email=email, password=password)
        else:
            user.set_password(password)
        user.is_active = False
        user.save()
    token = signing.dumps(
        {
            "u": user.pk,
            "o": organization_slug,
            "n": organization_name,
            "t": default_token_generator.make_token(user),
        },
        salt=_SIGNUP_SALT,
    )
    link = f"{settings.PERDURA_WEB_URL}/api/v1/auth/signup/confirm/?token={token}"
    send_mail(
        "Confirm your Perdura sign-up",
        f"To create the organisation {organization_slug!r} and sign in, POST this token to "
        f"/api/v1/auth/signup/confirm/ (within {SIGNUP_LINK_LIFETIME.days} days):\n{link}\n\n"
        "If it was not you, ignore this email.\n",
        None,
        [email],
    )


def _pending_signup(user: object) -> bool:
    """An account made by a sign-up whose link was not followed yet: inactive and in no organisation."""
    return not user.is_active and not Membership.objects.filter(user=user).exists()


def signup_confirm(*, token: str) -> Membership:
    """Finish a sign-up from its emailed token: the person becomes active and owns the new organisation.

    Single use: signing in changes what the token was made from.

    Raises:
        TenantError: the token is invalid, used or expired.
        OrganizationAlreadyExists: the organisation name was taken meanwhile (sign up again with another).
    """
    invalid = TenantError("this sign-up link is not valid (wrong, used or expired): sign up again")
    try:
        data = signing.loads(token, salt=_SIGNUP_SALT, max_age=SIGNUP_LINK_LIFETIME)
    except signing.BadSignature:
        raise invalid from None
    user = get_user_model().objects.filter(pk=data.get("u")).first()
    if (
        user is None
        or not _pending_signup(user)
        or not default_token_generator.check_token(user, data.get("t", ""))
    ):
        raise invalid
    with transaction.atomic():
        user.is_active = True
        user.save(update_fields=["is_active"])
        # The new organisation's first entries are the new person's (anonymous when the request began).
        with audit.acting_as_user(user):
            organization = services.organization_create(
                slug=data["o"], owner_email=user.email, name=data.get("n", "")
            )
    return Membership.objects.select_related("organization").get(organization=organization, user=user)


# --- invitations -----------------------------------------------------------------------------


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invitation_create(*, actor: Actor, email: str, role: str) -> tuple[Invitation, str]:
    """Invite `email` into the actor's organisation with `role`, and email them the link.

    Returns the invitation and its token (sent by email only; the REST API never shows it).

    Raises:
        Forbidden: the actor is not an owner or admin, or an admin invites an owner.
        TenantError: bad email or role, or already a member.
    """
    role = _org_role(role)
    _check_may_set(actor, role)
    email = _normalise_email(email)
    if Membership.objects.filter(organization=actor.organization, user__username=email).exists():
        raise TenantError(f"{email} is already a member of {actor.organization.slug}")
    token = secrets.token_urlsafe(32)
    now = clock.now()
    with transaction.atomic():
        invitation = Invitation.objects.create(
            organization=actor.organization,
            email=email,
            role=role,
            token_hash=_token_hash(token),
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
    link = f"{settings.PERDURA_WEB_URL}/api/v1/invitations/accept/?token={token}"
    body = (
        f"You are invited to join {actor.organization.name} ({actor.organization.slug}) on Perdura as {role}.\n\n"
        f"Accept within 7 days: {link}\n(POST the token with a password to /api/v1/invitations/accept/.)\n"
    )
    transaction.on_commit(
        lambda: send_mail(f"Join {actor.organization.slug} on Perdura", body, None, [email])
    )
    log.info("invitation %s to organisation %s by %s", invitation.id, actor.organization.slug, actor.label)
    return invitation, token


def invitation_find(token: str) -> Invitation | None:
    """The open invitation with `token` (not accepted, revoked or expired), or None."""
    invitation = (
        Invitation.objects.select_related("organization").filter(token_hash=_token_hash(token)).first()
    )
    if invitation is None or invitation.accepted_at or invitation.revoked_at:
        return None
    if invitation.expires_at <= clock.now():
        return None
    return invitation


def invitation_accept(*, token: str, password: str) -> Membership:
    """Accept an invitation: the invited person (created, or with their existing password checked)
    joins the organisation with the invited role.

    Raises:
        TenantError: unknown, used, revoked or expired token; wrong or weak password.
    """
    with transaction.atomic():
        invitation = invitation_find(token)
        if invitation is not None:
            invitation = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if invitation is None or invitation.accepted_at or invitation.revoked_at:
            raise TenantError("this invitation is not valid (unknown, used, revoked or expired)")
        user = user_by_email(invitation.email)
        pending = user is not None and _pending_signup(user)
        if user is not None and user.has_usable_password() and not pending:
            if not user.check_password(password):
                raise TenantError("the password does not match the account of this email")
        else:
            user_model = get_user_model()
            _check_password(password, user or user_model(username=invitation.email, email=invitation.email))
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
            membership = services.member_add(
                organization=invitation.organization, email=invitation.email, role=OrgRole(invitation.role)
            )
        Invitation.objects.filter(pk=invitation.pk).update(accepted_at=clock.now())
    return Membership.objects.select_related("organization", "user").get(pk=membership.pk)


def invitation_revoke(*, actor: Actor, invitation: Invitation) -> Invitation:
    """Revoke a pending invitation (its link stops working)."""
    _check_may_set(actor, _org_role(invitation.role))
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


# --- organisation roles ------------------------------------------------------------------------


def _org_role(role: str) -> OrgRole:
    try:
        return OrgRole(role)
    except ValueError:
        raise TenantError(f"unknown role {role!r}: use owner, admin or member") from None


def _check_may_set(actor: Actor, role: OrgRole, current: OrgRole | None = None) -> None:
    if not actor.is_org_admin:
        raise Forbidden("only owners and admins of the organisation manage its members")
    if OrgRole.OWNER in (role, current) and actor.org_role != OrgRole.OWNER:
        raise Forbidden("only owners make or unmake owners")


def _check_not_last_owner(membership: Membership) -> None:
    if membership.role != OrgRole.OWNER:
        return
    owners = Membership.objects.select_for_update().filter(
        organization_id=membership.organization_id, role=OrgRole.OWNER
    )
    if len(owners) <= 1:
        raise TenantError("an organisation keeps at least one owner")


def member_set_role(*, actor: Actor, membership: Membership, role: str) -> Membership:
    """Change a member's organisation role.

    Raises:
        Forbidden: see `_check_may_set`.
        TenantError: unknown role, or it would leave the organisation without an owner.
    """
    new = _org_role(role)
    _check_may_set(actor, new, OrgRole(membership.role))
    with transaction.atomic():
        if new != OrgRole.OWNER:
            _check_not_last_owner(membership)
        audit.record_change(
            action="member.role",
            target=f"member/{membership.user.email}",
            organization=actor.organization,
            details={"from": membership.role, "to": new.value},
        )
        membership.role = new.value
        membership.save(update_fields=["role"])
        # An owner or admin held the admin role on every namespace; as a member, only their grants.
        access.keys_fit_creator(membership.organization, membership.user, "member.role")
    return membership


def member_remove(*, actor: Actor, membership: Membership) -> None:
    """Remove a person from the organisation: their namespace roles go, and the keys they created
    are revoked (a key must not outlive its creator's access).

    Raises:
        Forbidden: see `_check_may_set`.
        TenantError: the last owner.
    """
    _check_may_set(actor, OrgRole(membership.role), OrgRole(membership.role))
    with transaction.atomic():
        _check_not_last_owner(membership)
        NamespaceUserPermission.objects.filter(
            user_id=membership.user_id, content_object__organization_id=membership.organization_id
        ).delete()
        keys = ApiKey.objects.filter(
            organization_id=membership.organization_id,
            created_by_id=membership.user_id,
            revoked_at__isnull=True,
        )
        revoked = sorted(api_keys.display(prefix) for prefix in keys.values_list("prefix", flat=True))
        keys.update(revoked_at=clock.now())
        audit.record_change(
            action="member.remove",
            target=f"member/{membership.user.email}",
            organization=actor.organization,
            details={"role": membership.role, "revoked_keys": revoked},
        )
        membership.delete()


# --- passwords ---------------------------------------------------------------------------------


def password_reset_request(*, email: str) -> None:
    """Email a reset link if an active account has `email`; silent otherwise (no account probing).

    People created by `perdura org create` or an invitation without a password set theirs this way.
    """
    try:
        email = _normalise_email(email)
    except TenantError:
        return
    user = user_by_email(email)
    if user is None or not user.is_active:
        return
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    link = f"{settings.PERDURA_WEB_URL}/api/v1/auth/password-reset/confirm/?uid={uid}&token={token}"
    body = (
        "Someone asked to reset the password of your Perdura account.\n\n"
        f"To choose a new one, POST uid={uid}, token and a new password to /api/v1/auth/password-reset/confirm/:\n"
        f"{link}\n\nIf it was not you, ignore this email.\n"
    )
    send_mail("Reset your Perdura password", body, None, [user.email])


def password_reset_confirm(*, uid: str, token: str, password: str) -> object:
    """Set a new password with a reset token (single use: the token depends on the old password).

    Raises:
        TenantError: the link is invalid or used, or the password is weak.
    """
    user = None
    try:
        user = get_user_model().objects.filter(pk=int(force_str(urlsafe_base64_decode(uid)))).first()
    except (ValueError, TypeError, OverflowError):
        user = None
    if user is None or not default_token_generator.check_token(user, token):
        raise TenantError("this password reset link is not valid (wrong, used or expired)")
    _check_password(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    return user


# --- API keys made by people ---------------------------------------------------------------------


def apikey_create(
    *, actor: Actor, name: str, role: str, namespaces: list[Namespace], expires_in: timedelta
) -> tuple[ApiKey, str]:
    """A key made by a person: its role may not exceed the person's own role on any of its namespaces.

    Raises:
        Forbidden: a key is acting, or the role exceeds the person's role on a namespace.
        TenantError: see services.apikey_create.
    """
    if actor.user is None:
        raise Forbidden("API keys are created by people: sign in")
    _check_covers(actor, role, namespaces)
    return services.apikey_create(
        organization=actor.organization,
        name=name,
        role=role,
        namespaces=namespaces,
        expires_in=expires_in,
        created_by=actor.user,
    )


def apikey_rotate(*, actor: Actor, key: ApiKey, grace: timedelta) -> tuple[ApiKey, str]:
    """Rotate a key the actor sees; the actor's role must still cover the key's.

    Raises:
        Forbidden: the actor's role no longer covers the key.
        TenantError: the key is revoked.
    """
    _check_covers(actor, key.role, list(key.namespaces.all()))
    return services.apikey_rotate(key=key, grace=grace)


def _check_covers(actor: Actor, role: str, namespaces: list[Namespace]) -> None:
    try:
        roles.KeyRole(role)
    except ValueError:
        raise TenantError(f"unknown role {role!r}: use reader, operator or admin") from None
    for namespace in namespaces:
        held = actor.namespace_role(namespace)
        if not roles.role_covers(held, role):
            raise Forbidden(
                f"a key cannot exceed its creator's role: you are {held or 'nothing'} on {namespace.name}, "
                f"not {role}"
            )


def organization_update(*, actor: Actor, name: str) -> Organization:
    """Rename the organisation (its display name; the slug in namespace names never changes)."""
    if not actor.is_org_admin:
        raise Forbidden("only owners and admins of the organisation change it")
    name = name.strip()
    if not name or len(name) > 255:
        raise TenantError("the organisation name must have 1-255 characters")
    actor.organization.name = name
    with transaction.atomic():
        actor.organization.save(update_fields=["name"])
        audit.record_change(
            action="organization.update",
            target=f"organization/{actor.organization.slug}",
            organization=actor.organization,
            details={"name": name},
        )
    return actor.organization
