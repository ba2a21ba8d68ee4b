"""Authenticating API keys: the per-call hot path of the gRPC interceptor.

One indexed query per call finds the key by its public prefix together with its namespaces; the
hash is compared in constant time; expiry and revocation are checked against the row just read,
so revoking a key takes effect on the very next call in every process. `last_used_at` is written
at most once a minute per key so the path stays a single read almost always.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from perdura import clock

from tenants import api_keys
from tenants.models import ApiKey

TOUCH_EVERY = timedelta(minutes=1)


class AuthError(Exception):
    """The presented credentials are not valid; the message names the key by its prefix only."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: an API key with its grants, or the anonymous caller of the loopback allowance."""

    anonymous: bool
    key_id: str = ""
    key_name: str = ""
    prefix: str = ""
    organization_id: str = ""
    organization_slug: str = ""
    role: str = ""
    namespaces: frozenset[str] = frozenset()
    """Names of the namespaces the key may use."""
    namespace_ids: frozenset[str] = frozenset()
    grants: frozenset[tuple[str, str]] = frozenset()
    """(name, id) of each namespace the key may use: tells whether two fields name the same namespace."""
    rate_limits: tuple[tuple[str, float], ...] = ()
    """The key's own rates (bucket name, requests per second) in each of its namespaces (tenants/quotas.py)."""

    def namespace_id_of(self, name: str) -> str | None:
        """The id of the granted namespace called `name`, None if the key has no such namespace."""
        return next((i for n, i in self.grants if n == name), None)

    @property
    def label(self) -> str:
        """How logs and errors name the caller (never the secret)."""
        return (
            "anonymous" if self.anonymous else f"API key {self.key_name!r} ({api_keys.display(self.prefix)})"
        )


ANONYMOUS = Principal(anonymous=True)


def authenticate(header: str) -> Principal:
    """The principal of an `authorization` header value (`Bearer pdk_...`).

    Raises:
        AuthError: not a Perdura key, unknown, wrong secret, expired or revoked.
    """
    parsed = api_keys.parse(header)
    if parsed is None:
        raise AuthError("the authorization header does not carry a Perdura API key (Bearer pdk_...)")
    rows = list(
        ApiKey.objects.filter(prefix=parsed.prefix).values_list(
            "id",
            "name",
            "secret_hash",
            "role",
            "expires_at",
            "revoked_at",
            "last_used_at",
            "organization_id",
            "organization__slug",
            "namespaces__name",
            "namespaces__id",
            "rate_limits",
        )
    )
    shown = api_keys.display(parsed.prefix)
    # Unknown and wrong-secret keys get the same answer, so the prefix space cannot be probed.
    if not rows or not api_keys.verify(parsed.plaintext, rows[0][2]):
        raise AuthError(f"API key {shown} is not valid")
    key_id, name, _, role, expires_at, revoked_at, last_used_at, org_id, org_slug, _, _, limits = rows[0]
    now = clock.now()
    if revoked_at is not None:
        raise AuthError(f"API key {shown} was revoked")
    if expires_at <= now:
        raise AuthError(f"API key {shown} expired at {expires_at.isoformat(timespec='seconds')}")
    if last_used_at is None or now - last_used_at >= TOUCH_EVERY:
        ApiKey.objects.filter(pk=key_id).update(last_used_at=now)
    return Principal(
        anonymous=False,
        key_id=str(key_id),
        key_name=name,
        prefix=parsed.prefix,
        organization_id=str(org_id),
        organization_slug=org_slug,
        role=role,
        namespaces=frozenset(r[9] for r in rows if r[9] is not None),
        namespace_ids=frozenset(str(r[10]) for r in rows if r[10] is not None),
        grants=frozenset((r[9], str(r[10])) for r in rows if r[9] is not None),
        rate_limits=tuple(sorted((str(b), float(v)) for b, v in (limits or {}).items())),
    )
