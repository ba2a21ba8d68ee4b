"""Sign-up: a new person creates an organisation they own, once their emailed link proves the address."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.auth.tokens import default_token_generator
from django.core import signing
from django.core.mail import send_mail
from django.db import transaction

from tenants import audit
from tenants.errors import TenantError
from tenants.models import Membership
from tenants.services import organizations, people

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
    email = people.normalise_email(email)
    user_model = get_user_model()
    people.check_password(password, user_model(username=email, email=email))
    organizations.organization_check_free(slug=organization_slug)
    user = people.user_by_email(email)
    if user is not None and not people.pending_signup(user):
        make_password(password)  # the work the other branch does, so the timing tells nothing
        send_mail(
            "Sign-up to Perdura",
            "Someone tried to sign up to Perdura with this email address, which already has an account.\n\n"
            f"If it was you, log in at {settings.PERDURA_WEB_URL}/login/, or choose a new password "
            f"at {settings.PERDURA_WEB_URL}/password-reset/.\n\nIf it was not you, ignore this email.\n",
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
    link = f"{settings.PERDURA_WEB_URL}/signup/confirm/?token={token}"
    send_mail(
        "Confirm your Perdura sign-up",
        f"To create the organisation {organization_slug!r} and sign in, open this link (or POST its token to "
        f"/api/v1/auth/signup/confirm/) within {SIGNUP_LINK_LIFETIME.days} days:\n{link}\n\n"
        "If it was not you, ignore this email.\n",
        None,
        [email],
    )


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
        or not people.pending_signup(user)
        or not default_token_generator.check_token(user, data.get("t", ""))
    ):
        raise invalid
    with transaction.atomic():
        user.is_active = True
        user.save(update_fields=["is_active"])
        # The new organisation's first entries are the new person's (anonymous when the request began).
        with audit.acting_as_user(user):
            organization = organizations.organization_create(
                slug=data["o"], owner_email=user.email, name=data.get("n", "")
            )
    return Membership.objects.select_related("organization").get(organization=organization, user=user)
