"""A namespace's archival settings: the rules of its states and `s3://bucket/prefix` URIs (pure).

As in Temporal, history and visibility archival are set apart, each with a state (disabled or enabled)
and a URI; a request leaving a state unspecified or a URI empty keeps what the namespace has. Enabling
needs a URI, given now or before. Unlike Temporal, a namespace may move to a new URI at any time: each
archived run records where it went (engine.models.HistoryArchive), so older archives stay readable.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from tenants.errors import NamespaceError

MAX_URI = 1024
"""The longest URI kept (an S3 key is at most 1024 bytes; the object name below the prefix needs room)."""
MAX_PREFIX = 512

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
_SEGMENT = re.compile(r"^[A-Za-z0-9!_.*'()=+-]+$")
"""A prefix segment: S3's "safe characters" (no spaces, no characters needing URL encoding)."""


class State(enum.IntEnum):
    """Values match temporal.api.enums.v1.ArchivalState (0, unspecified, means "leave as it is")."""

    DISABLED = 1
    ENABLED = 2


@dataclass(frozen=True, slots=True)
class Location:
    """Where archives go: a bucket, and a prefix inside it ("" for the bucket's root)."""

    bucket: str
    prefix: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def key(self, name: str) -> str:
        """The object key of `name` under the prefix."""
        return f"{self.prefix}/{name}" if self.prefix else name


def parse_uri(uri: str, *, what: str = "archival") -> Location:
    """The location an `s3://bucket[/prefix]` URI names.

    Raises:
        NamespaceError: not such a URI, with what is wrong (`what` names the setting in the message).
    """

    def refuse(why: str) -> NamespaceError:
        return NamespaceError(f"{what} URI {uri[:200]!r} is invalid: {why}; use s3://bucket[/prefix]")

    if len(uri) > MAX_URI:
        raise refuse(f"longer than {MAX_URI} characters")
    parts = urlsplit(uri)
    if parts.scheme != "s3":
        raise refuse("Perdura archives to S3-compatible storage only")
    if parts.query or parts.fragment or "@" in parts.netloc or ":" in parts.netloc:
        raise refuse(
            "no credentials, port, query or fragment may be given (the store's endpoint and "
            "credentials come from the server's AWS_* environment)"
        )
    bucket = parts.netloc
    if not _BUCKET.match(bucket) or ".." in bucket or _IP.match(bucket):
        raise refuse(f"{bucket!r} is not an S3 bucket name (3-63 lowercase letters, digits, '.' or '-')")
    prefix = parts.path.strip("/")
    if len(prefix) > MAX_PREFIX:
        raise refuse(f"the prefix is longer than {MAX_PREFIX} characters")
    if prefix and any(s in ("", ".", "..") or not _SEGMENT.match(s) for s in prefix.split("/")):
        raise refuse("the prefix has an empty, '.' or '..' segment or a character S3 keys should not hold")
    return Location(bucket=bucket, prefix=prefix)


@dataclass(frozen=True, slots=True)
class Setting:
    """One kind of archival (history or visibility) of a namespace, as stored."""

    state: int
    uri: str

    @property
    def enabled(self) -> bool:
        return self.state == State.ENABLED


def apply(current: Setting, *, state: int, uri: str, what: str) -> Setting:
    """The setting after a request asking for `state` and `uri` (0 and "" keep the current ones).

    Raises:
        NamespaceError: an unknown state, a malformed URI, or enabled without any URI.
    """
    if state not in (0, State.DISABLED, State.ENABLED):
        raise NamespaceError(f"{what} archival state {state} is not one of disabled or enabled")
    uri = uri.strip()
    new_uri = parse_uri(uri, what=what).uri if uri else current.uri
    new_state = state or current.state
    if new_state == State.ENABLED and not new_uri:
        raise NamespaceError(
            f"{what} archival cannot be enabled without a {what} archival URI (s3://bucket/prefix)"
        )
    return Setting(state=new_state, uri=new_uri)


def check_bucket_allowed(location: Location, allowed: frozenset[str], *, what: str) -> None:
    """Refuse a bucket outside the operator's list (PERDURA_ARCHIVAL_BUCKETS; empty: any bucket).

    Raises:
        NamespaceError: the bucket is not on the list.
    """
    if allowed and location.bucket not in allowed:
        raise NamespaceError(
            f"{what} archival to bucket {location.bucket!r} is not allowed on this server "
            f"(PERDURA_ARCHIVAL_BUCKETS: {', '.join(sorted(allowed))})"
        )
