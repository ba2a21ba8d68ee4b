"""Members of an organisation: adding people, changing their organisation role, removing them.

Only owners and admins manage members, only owners make or unmake owners, and the last owner stays.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction
from perdura import clock

from tenants import api_keys, audit
from tenants.access import Actor
from tenants.errors import Forbidden, TenantError
from tenants.models import ApiKey, Membership, NamespaceUserPermission, Organization
from tenants.roles import OrgRole
from tenants.services import keys


def member_add(*, organization: Organization, email: str, role: OrgRole) -> Membership:
    """Give the person with `email` a role in `organization` (creating the user if needed).

    Raises:
        TenantError: the email is not an address.
    """
    email = email.strip().lower()
    if "@" not in email or email.startswith("@") or email.endswith("@"):
        raise TenantError(f"{email!r} is not an email address")
    user_model = get_user_model()
    user = user_model.objects.filter(email=email).first()
    if user is None:
        user = user_model.objects.create_user(username=email, email=email)  # unusable password until set
    with transaction.atomic():
        membership, _ = Membership.objects.update_or_create(
            organization=organization,
            user=user,
            defaults={"role": OrgRole(role).value, "created_at": clock.now()},
        )
        audit.record_change(
            action="member.add",
            target=f"member/{email}",
            organization=organization,
            details={"role": membership.role},
        )
    return membership


def org_role_parse(role: str) -> OrgRole:
    """The organisation role named `role`.

    Raises:
        TenantError: not owner, admin or member.
    """
    try:
        return OrgRole(role)
    except ValueError:
        raise TenantError(f"unknown role {role!r}: use owner, admin or member") from None


def check_may_set_role(actor: Actor, role: OrgRole, current: OrgRole | None = None) -> None:
    """Raise Forbidden unless the actor may give (or take away) `role`, replacing `current`."""
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
        Forbidden: see `check_may_set_role`.
        TenantError: unknown role, or it would leave the organisation without an owner.
    """
    new = org_role_parse(role)
    check_may_set_role(actor, new, OrgRole(membership.role))
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
        keys.apikeys_fit_creator(
            organization=membership.organization, user=membership.user, reason="member.role"
        )
    return membership


def member_remove(*, actor: Actor, membership: Membership) -> None:
    """Remove a person from the organisation: their namespace roles go, and the keys they created
    are revoked (a key must not outlive its creator's access).

    Raises:
        Forbidden: see `check_may_set_role`.
        TenantError: the last owner.
    """
    check_may_set_role(actor, OrgRole(membership.role), OrgRole(membership.role))
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
