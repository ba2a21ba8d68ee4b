"""Which buckets a call draws from (its key's, then its namespace's), each key's rate, the refusal's
wording, and its metric: the rules of per-key rate limits without a server (buckets in memory)."""

from __future__ import annotations

import time

import pytest
from perdura.ratelimit import Decision, MemoryLimiter
from prometheus_client import REGISTRY

from engine.api.ratelimits import Draw, Limit, NamespaceLimits, draws, exhausted
from tenants import quotas
from tenants.auth import ANONYMOUS, Principal
from tenants.quotas import Bucket


def key(prefix: str = "abcdefghijkl", **rate_limits: float) -> Principal:
    return Principal(
        anonymous=False,
        key_id="k",
        key_name="ci",
        prefix=prefix,
        role="operator",
        rate_limits=tuple(sorted(rate_limits.items())),
    )


class DefaultRates(NamespaceLimits):
    """The installation's rates with namespace overrides given here, without reading a namespace row."""

    def __init__(self, overrides: dict[str, dict[str, float]]) -> None:
        super().__init__(MemoryLimiter())
        self.overrides = overrides

    async def rates(self, namespace):
        rates = quotas.namespace_rates(self.overrides.get(namespace))
        self._rates[namespace] = (time.monotonic(), rates)
        return rates


def test_a_key_draws_from_its_own_bucket_before_its_namespaces():
    assert draws("a.acme", Bucket.ACTIONS, key()) == (
        Draw(Limit.KEY, "a.acme", Bucket.ACTIONS, "abcdefghijkl"),
        Draw(Limit.NAMESPACE, "a.acme", Bucket.ACTIONS),
    )


def test_a_caller_without_a_key_draws_from_the_namespace_alone():
    assert draws("default", Bucket.POLLS, ANONYMOUS) == (Draw(Limit.NAMESPACE, "default", Bucket.POLLS),)


def test_a_keys_buckets_are_its_own_per_namespace_and_bucket():
    keys = {
        d.key
        for namespace in ("a.acme", "b.acme")
        for bucket in quotas.LIMITED
        for prefix in ("abcdefghijkl", "mnopqrstuvwx")
        for d in draws(namespace, bucket, key(prefix))
    }
    assert len(keys) == 2 * 3 * 2 + 2 * 3  # every key's bucket, and each namespace's once
    assert Draw(Limit.NAMESPACE, "a.acme", Bucket.ACTIONS).key == quotas.bucket_key("a.acme", Bucket.ACTIONS)
    assert Draw(Limit.KEY, "a.acme", Bucket.ACTIONS, "abcdefghijkl").key == "key:abcdefghijkl:a.acme:actions"


def test_a_keys_rate_is_its_own_or_its_share_of_the_namespaces(settings):
    settings.PERDURA_RATE_ACTIONS = 100.0
    settings.PERDURA_KEY_RATE_SHARE = 0.25
    default = quotas.namespace_rates(None)
    overridden = quotas.namespace_rates({"actions": 40.0})
    assert quotas.key_rps(default, None, Bucket.ACTIONS) == 25.0
    assert quotas.key_rps(overridden, {}, Bucket.ACTIONS) == 10.0  # the share follows the namespace
    assert quotas.key_rps(default, {"actions": 3.0}, Bucket.ACTIONS) == 3.0
    assert quotas.key_rps(default, {"actions": 3.0}, Bucket.POLLS) == settings.PERDURA_RATE_POLLS * 0.25


def test_a_keys_refusal_names_the_key_by_prefix_and_a_namespaces_as_temporal():
    decision = Decision(False, 0.5)
    by_key = exhausted(Draw(Limit.KEY, "a.acme", Bucket.ACTIONS, "abcdefghijkl"), 2.0, decision)
    assert by_key.message == (
        "API key rate limit exceeded: key pdk_abcdefghijkl allows 2 actions requests per second in "
        "namespace 'a.acme' (the namespace's own limit is not the one hit); retry in 0.500s"
    )
    by_namespace = exhausted(Draw(Limit.NAMESPACE, "a.acme", Bucket.ACTIONS), 500.0, decision)
    assert by_namespace.message == (
        "namespace rate limit exceeded: namespace 'a.acme' allows 500 actions requests per second; "
        "retry in 0.500s"
    )


async def _admitted(limits: NamespaceLimits, namespace: str, principal: Principal, calls: int) -> int:
    refused = [await limits.check(namespace, Bucket.ACTIONS, principal) for _ in range(calls)]
    return sum(r is None for r in refused)


async def test_a_key_over_its_limit_spends_none_of_its_namespaces_budget(settings):
    settings.PERDURA_KEY_RATE_SHARE = 0.5
    limits = DefaultRates({"a.acme": {"actions": 10.0}})  # a burst of 20; a key's share: 5/s, a burst of 10
    looping, other = key("loopingloopi"), key("otherotherot")
    assert await _admitted(limits, "a.acme", looping, 100) == 10
    # The 90 refused calls took nothing from the namespace: the other key still has its whole share.
    assert await _admitted(limits, "a.acme", other, 10) == 10
    refusal = await limits.check("a.acme", Bucket.ACTIONS, other)
    assert refusal is not None
    assert "key pdk_otherotherot allows 5 actions" in refusal.message
    # The namespace's tokens left (20 - 20) are gone now: a caller without a key meets its limit.
    refusal = await limits.check("a.acme", Bucket.ACTIONS, ANONYMOUS)
    assert refusal is not None
    assert refusal.message.startswith("namespace rate limit exceeded")


async def test_a_keys_own_rate_above_its_share_is_still_held_by_the_namespace(settings):
    settings.PERDURA_KEY_RATE_SHARE = 0.5
    limits = DefaultRates({"a.acme": {"actions": 5.0}})  # a burst of 10
    refusals = [await limits.check("a.acme", Bucket.ACTIONS, key(actions=1000.0)) for _ in range(15)]
    assert sum(r is None for r in refusals) == 10
    assert all(r.message.startswith("namespace rate limit exceeded") for r in refusals if r is not None)


async def test_a_keys_refusals_are_counted_apart_from_the_namespaces(settings):
    settings.PERDURA_KEY_RATE_SHARE = 0.5
    namespace = "counted.acme"
    limits = DefaultRates({namespace: {"actions": 1.0}})  # a key's share: 0.5/s, a burst of 1

    def count(name: str) -> float:
        labels = {"namespace": namespace, "bucket": "actions"}
        return REGISTRY.get_sample_value(f"perdura_{name}_total", labels) or 0.0

    before = count("key_rate_limit_refusals"), count("rate_limit_refusals")
    assert await _admitted(limits, namespace, key(), 4) == 1
    assert count("key_rate_limit_refusals") - before[0] == 3
    assert count("rate_limit_refusals") - before[1] == 0
    # Known empty now: the shed path (headers only) refuses and counts it the same way, taking nothing.
    refusal = limits.known_empty(
        draws(namespace, Bucket.ACTIONS, Principal(anonymous=False, prefix="abcdefghijkl"))[0]
    )
    assert refusal is not None
    assert count("key_rate_limit_refusals") - before[0] == 4


@pytest.mark.parametrize("share", ["0", "-1", "1.5", "half"])
def test_the_share_must_be_a_fraction(share):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={
            "DJANGO_SETTINGS_MODULE": "perdura.settings",
            "PERDURA_KEY_RATE_SHARE": share,
            "PYTHONPATH": "platform",
        },
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "PERDURA_KEY_RATE_SHARE must be" in done.stderr
