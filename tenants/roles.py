"""Roles and what they may do: the one place that maps a role to an access level.

Organisation roles (owner, admin, member) say what a person may do to the organisation; API key
roles (reader, operator, admin) say what a key may do inside the namespaces it names. Every gRPC
method declares the access it needs in engine/api/methods.py; `allows` decides.
"""

from __future__ import annotations

import enum


class Access(enum.IntEnum):
    """What a call needs, in increasing order: each level includes the ones below it."""

    READ = 1
    """Reads: describe, list, history, queries, task queue and schedule reads."""
    WRITE = 2
    """Changes to runs: start, signal, cancel, terminate, reset, update, schedules; and worker calls
    (polls hand out tasks and responses write history, so a worker needs WRITE)."""
    ADMIN = 3
    """Namespace settings: update, deprecate, delete, search attributes; registering namespaces."""


class KeyRole(enum.StrEnum):
    """The role an API key carries on each of its namespaces."""

    READER = "reader"
    OPERATOR = "operator"
    ADMIN = "admin"


class OrgRole(enum.StrEnum):
    """A member's role in an organisation."""

    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"


_KEY_ACCESS = {KeyRole.READER: Access.READ, KeyRole.OPERATOR: Access.WRITE, KeyRole.ADMIN: Access.ADMIN}


def key_access(role: str) -> Access:
    """The highest access a key of `role` has on its namespaces."""
    return _KEY_ACCESS[KeyRole(role)]


def allows(role: str, needed: Access) -> bool:
    """True when a key of `role` may make a call that needs `needed`."""
    return key_access(role) >= needed


def least_role_for(needed: Access) -> KeyRole:
    """The weakest key role that allows `needed` (for error messages)."""
    return next(role for role, access in _KEY_ACCESS.items() if access >= needed)


# --- people: organisation roles and per-namespace roles (django-guardian object permissions) ----------

ORG_ADMINS = frozenset({OrgRole.OWNER, OrgRole.ADMIN})
"""Organisation roles that administer the organisation: members, namespaces, every key; they hold
the admin role on every namespace of the organisation."""

_ROLE_ORDER = [KeyRole.READER, KeyRole.OPERATOR, KeyRole.ADMIN]
NAMESPACE_PERMISSIONS = {
    KeyRole.READER: "view_namespace",
    KeyRole.OPERATOR: "operate_namespace",
    KeyRole.ADMIN: "administer_namespace",
}
"""The guardian permission (on tenants.Namespace) of each per-namespace role of a person. Grants are
cumulative: an operator holds view and operate, an admin all three."""


def permissions_for(role: str) -> list[str]:
    """The guardian codenames a person with namespace role `role` holds (cumulative)."""
    level = _ROLE_ORDER.index(KeyRole(role))
    return [NAMESPACE_PERMISSIONS[r] for r in _ROLE_ORDER[: level + 1]]


def role_from_permissions(codenames: set[str] | frozenset[str]) -> KeyRole | None:
    """The highest namespace role whose permission is among `codenames`, or None."""
    for role in reversed(_ROLE_ORDER):
        if NAMESPACE_PERMISSIONS[role] in codenames:
            return role
    return None


def role_covers(held: str | None, wanted: str) -> bool:
    """True when a holder of namespace role `held` may hand out `wanted` (a key never exceeds its creator)."""
    return held is not None and key_access(held) >= key_access(wanted)
