"""API key format, hashing, parsing and durations (tenants/api_keys.py), and the loopback check."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engine.api.auth import is_loopback
from tenants import api_keys


def test_generated_key_parses_back_to_its_prefix_and_verifies():
    new = api_keys.generate()
    parsed = api_keys.parse(new.plaintext)
    assert parsed is not None
    assert parsed.prefix == new.prefix
    assert api_keys.verify(parsed.plaintext, new.secret_hash)
    assert new.plaintext.startswith(f"pdk_{new.prefix}_")


def test_keys_are_random_and_only_their_hash_is_kept():
    a, b = api_keys.generate(), api_keys.generate()
    assert a.plaintext != b.plaintext
    assert a.prefix != b.prefix
    assert len(a.secret_hash) == 64
    assert a.plaintext not in a.secret_hash
    assert a.secret_hash == api_keys.hash_key(a.plaintext)


def test_a_key_with_a_changed_secret_does_not_verify():
    new = api_keys.generate()
    last = new.plaintext[-1]
    forged = new.plaintext[:-1] + ("A" if last != "A" else "B")
    assert api_keys.parse(forged) is not None
    assert not api_keys.verify(forged, new.secret_hash)


def test_bearer_header_is_accepted_in_any_case():
    new = api_keys.generate()
    for header in (f"Bearer {new.plaintext}", f"bearer {new.plaintext}", f"  Bearer   {new.plaintext} "):
        parsed = api_keys.parse(header)
        assert parsed is not None
        assert parsed.plaintext == new.plaintext


@pytest.mark.parametrize(
    "value",
    [
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "pdk_short_x",
        "xyz_abcdefghijkl_" + "a" * 43,
        "pdk_ABCDEFGHIJKL_" + "a" * 43,
    ],
)
def test_things_that_are_not_keys_do_not_parse(value):
    assert api_keys.parse(value) is None


def test_prefix_is_found_from_the_key_the_display_form_or_bare():
    new = api_keys.generate()
    assert api_keys.parse_prefix(new.plaintext) == new.prefix
    assert api_keys.parse_prefix(api_keys.display(new.prefix)) == new.prefix
    assert api_keys.parse_prefix(new.prefix) == new.prefix
    assert api_keys.parse_prefix("nonsense!") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("2w", timedelta(weeks=2)),
        ("90m", timedelta(minutes=90)),
        ("45s", timedelta(seconds=45)),
    ],
)
def test_durations(text, expected):
    assert api_keys.parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "30", "0d", "-1d", "1y", "d", "3.5d"])
def test_bad_durations_say_what_to_write(text):
    with pytest.raises(ValueError, match="s, m, h, d or w"):
        api_keys.parse_duration(text)


@pytest.mark.parametrize(
    ("peer", "loopback"),
    [
        ("ipv4:127.0.0.1:5000", True),
        ("ipv4:127.8.9.1:5000", True),
        ("ipv6:[::1]:5000", True),
        ("ipv6:[::ffff:127.0.0.1]:5000", True),
        ("unix:/tmp/sock", True),
        ("ipv4:10.0.0.7:5000", False),
        ("ipv6:[2001:db8::1]:5000", False),
        ("ipv6:[::ffff:10.0.0.1]:5000", False),
        ("", False),
        ("garbage", False),
    ],
)
def test_loopback_peers(peer, loopback):
    assert is_loopback(peer) is loopback
