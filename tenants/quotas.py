"""Quotas: each namespace's rate-limit buckets (defaults and overrides) and each organisation's caps.

Every namespace has three buckets (Temporal Cloud separates the same kinds of load):

- **actions**: starts, signals, signal-with-start, updates (what Temporal Cloud bills as actions);
- **polls**: worker poll *requests* (a token per request: a poller that waits holds none);
- **visibility**: list, count and scan queries.

Which method draws from which bucket is a column of the one method table (engine/api/methods.py).
The defaults come from settings (PERDURA_RATE_ACTIONS/POLLS/VISIBILITY); the operator overrides them
per namespace (`perdura namespace update NAME --actions-rps N`), stored on the namespace row. A
bucket holds two seconds' worth of tokens, so short bursts pass.

Each API key also has the same three buckets in each of its namespaces, so one leaked or looping key
cannot spend its namespace's whole budget: a call takes a token from the key's bucket first, then from
the namespace's. A key's rate is PERDURA_KEY_RATE_SHARE (default 0.5) of its namespace's rate, so it
follows the namespace's overrides, unless the key has a rate of its own for that bucket (set by an admin
of every namespace of the key, or the operator: `perdura apikey update KEY --actions-rps N`).
Unauthenticated loopback callers of `perdura dev` have no key and draw only on the namespace.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings
from perdura.ratelimit import Rate

BURST_SECONDS = 2.0
"""A bucket holds this many seconds of its rate."""
MAX_RPS = 1_000_000.0


class Bucket(enum.StrEnum):
    """Which per-namespace bucket a method draws a token from (NONE: it draws none)."""

    ACTIONS = "actions"
    POLLS = "polls"
    VISIBILITY = "visibility"
    NONE = "none"


LIMITED = (Bucket.ACTIONS, Bucket.POLLS, Bucket.VISIBILITY)


class QuotaError(ValueError):
    """An override or a cap that cannot be honoured, with a message for a person."""


def bucket_key(namespace: str, bucket: Bucket) -> str:
    """The shared limiter's key of a namespace's bucket: the gRPC API and the CLI's bulk export draw on it."""
    return f"ns:{namespace}:{bucket.value}"


def key_bucket_key(prefix: str, namespace: str, bucket: Bucket) -> str:
    """The shared limiter's key of an API key's bucket in one namespace (by the key's public prefix, which
    a call's header names before the key is verified, so a flood can be shed unread)."""
    return f"key:{prefix}:{namespace}:{bucket.value}"


def rate_of(per_second: float) -> Rate:
    """The bucket of `per_second` tokens a second (holding BURST_SECONDS of them)."""
    return Rate(per_second=per_second, burst=max(1, math.ceil(per_second * BURST_SECONDS)))


def default_rps() -> dict[Bucket, float]:
    """The installation's default rates (settings), per bucket."""
    return {
        Bucket.ACTIONS: settings.PERDURA_RATE_ACTIONS,
        Bucket.POLLS: settings.PERDURA_RATE_POLLS,
        Bucket.VISIBILITY: settings.PERDURA_RATE_VISIBILITY,
    }


def rest_rate() -> Rate:
    """Each organisation's bucket of REST API requests (PERDURA_RATE_REST a second, people and keys alike)."""
    return rate_of(settings.PERDURA_RATE_REST)


@dataclass(frozen=True, slots=True)
class NamespaceRates:
    """The rates in force for one namespace: the defaults with its overrides applied."""

    rps: Mapping[Bucket, float]
    overridden: frozenset[Bucket]

    def rate(self, bucket: Bucket) -> Rate:
        return rate_of(self.rps[bucket])


def namespace_rates(overrides: Mapping[str, float] | None) -> NamespaceRates:
    """The rates of a namespace whose row stores `overrides` (bucket name → requests per second)."""
    rps = default_rps()
    overridden = set()
    for name, value in (overrides or {}).items():
        try:
            bucket = Bucket(name)
        except ValueError:
            continue  # a bucket retired since the override was stored
        if bucket in LIMITED:
            rps[bucket] = float(value)
            overridden.add(bucket)
    return NamespaceRates(rps=rps, overridden=frozenset(overridden))


def key_share() -> float:
    """The share of each namespace bucket a key without a rate of its own may spend (PERDURA_KEY_RATE_SHARE)."""
    return settings.PERDURA_KEY_RATE_SHARE


def key_rps(namespace: NamespaceRates, overrides: Mapping[str, float] | None, bucket: Bucket) -> float:
    """An API key's requests per second of `bucket` in a namespace whose rates are `namespace`: the key's
    own rate when it has one, else its share of the namespace's. Pure but for the share setting.

    A key's own rate may exceed its namespace's: the namespace's bucket still applies, so the key then
    spends at most the namespace's rate (a key of its namespace's only application may need that).
    """
    own = (overrides or {}).get(bucket.value)
    if own is not None:
        return float(own)
    return namespace.rps[bucket] * key_share()


def validate_overrides(changes: Mapping[str, float | None]) -> dict[Bucket, float | None]:
    """Check overrides (None: back to the default) before they are stored.

    Raises:
        QuotaError: an unknown bucket or a rate that is not a positive number of requests per second.
    """
    checked: dict[Bucket, float | None] = {}
    for name, value in changes.items():
        try:
            bucket = Bucket(name)
        except ValueError:
            bucket = Bucket.NONE
        if bucket not in LIMITED:
            raise QuotaError(f"unknown rate-limit bucket {name!r}: use actions, polls or visibility")
        if value is not None and not (0 < value <= MAX_RPS and math.isfinite(value)):
            raise QuotaError(
                f"the {name} rate must be between 0 and {MAX_RPS:g} requests a second, not {value}"
            )
        checked[bucket] = value
    return checked


def max_namespaces() -> int:
    """Namespaces an organisation may have (PERDURA_ORG_MAX_NAMESPACES)."""
    return settings.PERDURA_ORG_MAX_NAMESPACES


def max_api_keys() -> int:
    """Live (neither revoked nor expired) API keys an organisation may have (PERDURA_ORG_MAX_API_KEYS)."""
    return settings.PERDURA_ORG_MAX_API_KEYS
