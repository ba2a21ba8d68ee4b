"""Task tokens: opaque bytes naming one task; anything else is an InvalidArgument."""

from __future__ import annotations

import msgspec
import pytest

from engine import tokens
from engine.errors import InvalidArgument
from engine.tokens import TaskToken

TOKENS = [
    TaskToken("ns-id", "wf-1", "run-1", 2, 1),
    TaskToken("ns-id", "wf-1", "run-1", 5, 3, started_event_id=6),
    TaskToken("ns-id", "wf-ü", "run-1", 5, 2, activity_id="act-1"),
    TaskToken("", "", "", 0, 0),
    TaskToken("n" * 300, "w" * 1000, "r" * 36, 2**40, 2**31 - 1, 2**40 + 1, "a" * 1000),
]


@pytest.mark.parametrize("token", TOKENS)
def test_encode_then_decode_gives_the_token_back(token):
    data = tokens.encode(token)
    assert isinstance(data, bytes)
    assert data.startswith(b"P1")
    assert tokens.decode(data) == token


def test_defaults_of_optional_fields():
    token = tokens.decode(tokens.encode(TaskToken("ns", "wf", "run", 2, 1)))
    assert (token.started_event_id, token.activity_id) == (0, "")


def test_distinct_tasks_have_distinct_tokens():
    assert len({tokens.encode(t) for t in TOKENS}) == len(TOKENS)


VALID = tokens.encode(TOKENS[1])
GARBAGE = [
    ("empty", b""),
    ("xyz", b"xyz"),
    ("prefix only", b"P1"),
    ("prefix then garbage", b"P1garbage"),
    ("other version", b"P2" + VALID[2:]),
    ("truncated", VALID[:-3]),
    ("wrong shape", b"P1" + msgspec.msgpack.encode({"namespace_id": "x"})),
    ("wrong types", b"P1" + msgspec.msgpack.encode([1, 2, 3, "four", "five"])),
    ("too few fields", b"P1" + msgspec.msgpack.encode(["ns", "wf"])),
    ("random bytes", bytes(range(256))),
]


@pytest.mark.parametrize("data", [g[1] for g in GARBAGE], ids=[g[0] for g in GARBAGE])
def test_garbage_is_invalid_argument(data):
    with pytest.raises(InvalidArgument) as raised:
        tokens.decode(data)
    assert raised.value.message == "Error deserializing task token."
    assert raised.value.code == "INVALID_ARGUMENT"
