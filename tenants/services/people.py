"""People: their accounts (Django users) by email, password strength, and password resets."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.utils.encoding import force_bytes, force_str
from django.utils.http import urlsafe_base64_decode, urlsafe_base64_encode

from tenants.errors import TenantError
from tenants.models import Membership


def normalise_email(email: str) -> str:
    """The address in the form accounts are kept under (trimmed, lower case).

    Raises:
        TenantError: not an email address.
    """
    email = email.strip().lower()
    local, at, domain = email.rpartition("@")
    if not at or not local or "." not in domain or " " in email:
        raise TenantError(f"{email!r} is not an email address")
    return email


def check_password(password: str, user: Any | None = None) -> None:
    """Raise TenantError with the validators' messages unless `password` passes Django's validators."""
    try:
        password_validation.validate_password(password, user)
    except ValidationError as e:
        raise TenantError(" ".join(e.messages)) from None


def user_by_email(email: str) -> Any | None:
    """The account of `email`, or None."""
    return get_user_model().objects.filter(username=email.strip().lower()).first()


def pending_signup(user: Any) -> bool:
    """An account made by a sign-up whose link was not followed yet: inactive and in no organisation."""
    return not user.is_active and not Membership.objects.filter(user=user).exists()


def password_reset_request(*, email: str) -> None:
    """Email a reset link if an active account has `email`; silent otherwise (no account probing).

    People created by `perdura org create` or an invitation without a password set theirs this way.
    """
    try:
        email = normalise_email(email)
    except TenantError:
        return
    user = user_by_email(email)
    if user is None or not user.is_active:
        return
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    link = f"{settings.PERDURA_WEB_URL}/password-reset/confirm/?uid={uid}&token={token}"
    body = (
        "Someone asked to reset the password of your Perdura account.\n\n"
        f"To choose a new one, open this link (or POST uid={uid}, token and a new password to "
        f"/api/v1/auth/password-reset/confirm/):\n{link}\n\nIf it was not you, ignore this email.\n"
    )
    send_mail("Reset your Perdura password", body, None, [user.email])


def password_reset_confirm(*, uid: str, token: str, password: str) -> Any:
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
    check_password(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    return user
