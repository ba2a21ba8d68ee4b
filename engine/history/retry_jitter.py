"""Retry jitter (beyond Temporal): a retry's backoff shortened by a deterministic random share, so the
retries of many activities or runs that failed together do not all come back at the same instant.

The rule: with a jitter fraction f in [0, 1], a retry whose policy gives the delay d waits
d x (1 - f x u), where u in [0, 1) comes from a hash of the retrying attempt's identity (run, activity,
attempt), so the same inputs always give the same delay (a transaction that runs again decides alike).
The delay never grows: a retry stays within the policy's maximum interval, and whether it happens at all
is decided on the unjittered delay (schedule-to-close and workflow execution timeouts as without jitter).
f = 1 is "full jitter" (anywhere from no wait to the computed one); f = 0 is off.

Where f comes from: the `perdura-retry-jitter` header of the activity (its ScheduleActivityTask command) or
of the run (its start request), else the namespace's default (`perdura namespace update --retry-jitter`).
Temporal's RetryPolicy has no jitter field; headers are what every official SDK can already send per call
(through an interceptor), and SDKs pass them through unencoded by default, so the server can read them.
"""

from __future__ import annotations

import hashlib
import json
import math

from temporalio.api.common.v1 import Header

HEADER = "perdura-retry-jitter"


def _read(header: Header | None) -> float | str | None:
    """The header's fraction, None without one, or what is wrong with it."""
    if header is None or HEADER not in header.fields:
        return None
    payload = header.fields[HEADER]
    if payload.metadata.get("encoding", b"") != b"json/plain":
        return f"the {HEADER} header must be a json/plain payload (a number from 0 to 1)"
    try:
        value = json.loads(payload.data)
    except ValueError:
        value = None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        return f"the {HEADER} header must be a number from 0 (off) to 1 (full jitter)"
    return float(value)


def header_problem(header: Header | None) -> str | None:
    """What is wrong with a `perdura-retry-jitter` header, for the request or command that carries it."""
    read = _read(header)
    return read if isinstance(read, str) else None


def header_fraction(header: Header | None) -> float | None:
    """The jitter fraction a `perdura-retry-jitter` header carries, or None when it has none.

    The value is a JSON number from 0 to 1 (a json/plain payload, what SDKs' default converters make of
    a float). Requests and commands with another value are refused (header_problem); one stored before
    that check is ignored: the namespace default applies.
    """
    read = _read(header)
    return read if isinstance(read, float) else None


def jittered(delay: float, fraction: float, key: str) -> float:
    """`delay` less a share of it from 0 to `fraction`, the same for the same `key` (whole milliseconds,
    never more than `delay`)."""
    if fraction <= 0 or delay <= 0 or not math.isfinite(delay):
        return delay
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    unit = int.from_bytes(digest, "big") / 2**64
    return max(0.0, math.floor(delay * (1 - min(fraction, 1.0) * unit) * 1000) / 1000)
