"""The rules of a namespace's archival settings (tenants/archival.py): URIs, states, what a request keeps."""

from __future__ import annotations

import pytest

from tenants import archival
from tenants.errors import NamespaceError

DISABLED = archival.Setting(state=archival.State.DISABLED, uri="")


@pytest.mark.parametrize(
    ("uri", "bucket", "prefix"),
    [
        ("s3://archive", "archive", ""),
        ("s3://archive/", "archive", ""),
        ("s3://my.archive-1/runs/history", "my.archive-1", "runs/history"),
        ("s3://archive/a/b/", "archive", "a/b"),
    ],
)
def test_an_s3_uri_names_a_bucket_and_a_prefix(uri, bucket, prefix):
    location = archival.parse_uri(uri)
    assert (location.bucket, location.prefix) == (bucket, prefix)
    assert location.key("x") == (f"{prefix}/x" if prefix else "x")


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("file:///tmp/archive", "S3-compatible storage only"),
        ("gs://bucket/p", "S3-compatible storage only"),
        ("s3://", "not an S3 bucket name"),
        ("s3://Upper/p", "not an S3 bucket name"),
        ("s3://ab/p", "not an S3 bucket name"),
        ("s3://a..b/p", "not an S3 bucket name"),
        ("s3://10.0.0.1/p", "not an S3 bucket name"),
        ("s3://key:secret@bucket/p", "no credentials"),
        ("s3://bucket:9000/p", "no credentials"),
        ("s3://bucket/p?x=1", "no credentials"),
        ("s3://bucket/a//b", "segment"),
        ("s3://bucket/a/../b", "segment"),
        ("s3://bucket/a b", "segment"),
        ("s3://bucket/" + "p" * 600, "prefix is longer"),
        ("s3://bucket/" + "p/" * 600, "longer than 1024"),
    ],
)
def test_a_uri_that_is_not_s3_bucket_prefix_is_refused_with_why(uri, why):
    with pytest.raises(NamespaceError, match="use s3://bucket") as raised:
        archival.parse_uri(uri, what="history")
    assert why in str(raised.value)
    assert str(raised.value).startswith("history URI")


def test_enabling_needs_a_uri_given_now_or_before():
    with pytest.raises(NamespaceError, match="cannot be enabled without a history archival URI"):
        archival.apply(DISABLED, state=archival.State.ENABLED, uri="", what="history")
    with_uri = archival.apply(DISABLED, state=0, uri="s3://archive/h", what="history")
    assert with_uri == archival.Setting(state=archival.State.DISABLED, uri="s3://archive/h")
    enabled = archival.apply(with_uri, state=archival.State.ENABLED, uri="", what="history")
    assert enabled.enabled
    assert enabled.uri == "s3://archive/h"


def test_unspecified_keeps_and_a_new_uri_replaces_the_old_one():
    enabled = archival.Setting(state=archival.State.ENABLED, uri="s3://archive/old")
    assert archival.apply(enabled, state=0, uri="", what="history") == enabled
    moved = archival.apply(enabled, state=0, uri="s3://archive/new/", what="history")
    assert moved == archival.Setting(state=archival.State.ENABLED, uri="s3://archive/new")
    disabled = archival.apply(enabled, state=archival.State.DISABLED, uri="", what="history")
    assert disabled == archival.Setting(state=archival.State.DISABLED, uri="s3://archive/old")


def test_an_unknown_state_is_refused():
    with pytest.raises(NamespaceError, match="state 7"):
        archival.apply(DISABLED, state=7, uri="", what="visibility")


def test_the_operator_may_limit_the_buckets():
    location = archival.parse_uri("s3://tenant-a/x")
    archival.check_bucket_allowed(location, frozenset(), what="history")
    archival.check_bucket_allowed(location, frozenset({"tenant-a"}), what="history")
    with pytest.raises(NamespaceError, match="PERDURA_ARCHIVAL_BUCKETS"):
        archival.check_bucket_allowed(location, frozenset({"other"}), what="history")
