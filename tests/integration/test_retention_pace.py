"""Retention's pace (engine/shards/retention_pace.py): a backlog drains at PERDURA_RETENTION_RATE runs a
second, and while the bucket is empty retention is not due anywhere a pass or the sweep would look."""

from __future__ import annotations

import time

import pytest
from perdura import clock

from engine.history.retention import Step
from engine.models import Retention
from engine.persistence import leases
from engine.shards import retention, retention_pace, timers
from engine.shards.budget import Budget
from tests.integration.test_retention import _runs_on_one_shard, remaining_rows

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def fresh_pace():
    retention_pace.reset()
    yield
    retention_pace.reset()


def test_a_paced_backlog_goes_a_group_per_token_and_is_not_due_while_the_bucket_is_empty(
    settings, monkeypatch
):
    settings.PERDURA_RATE_LIMITS = "memory"
    settings.PERDURA_RETENTION_RATE = 2.0  # a token every 500 ms: far longer than a group takes
    settings.PERDURA_SWEEP_SECONDS = 1.0  # a sweep's worth of tokens: two
    monkeypatch.setattr(retention_pace, "GROUPS_PER_SECOND", 1)  # so groups are of two
    assert retention_pace.group_size() == 2
    runs = _runs_on_one_shard(6)
    shard = runs[0].shard
    lease = leases.acquire(shard, "w")
    assert lease is not None

    assert retention.process(shard, lease) == 2  # the bucket held two tokens
    assert Retention.objects.filter(execution_id__in=[r.pk for r in runs]).count() == 4
    assert not retention_pace.ready()
    now = clock.now()
    assert shard not in retention.due_shards(now)
    assert "retention" not in timers._due_queues(shard, now)
    next_due = retention.next_due()
    assert next_due is not None
    assert next_due > now
    assert retention.process(shard, lease) == 0  # nothing taken, nothing asked of the store

    time.sleep(1.05)  # two intervals: the bucket is full again (two tokens, never more)
    assert retention_pace.ready()
    assert shard in retention.due_shards(clock.now())
    assert retention.process(shard, lease) == 2
    gone = [r for r in runs if not remaining_rows(r)]
    assert len(gone) == 4


def test_a_workers_pass_waits_for_the_next_tokens_and_keeps_to_the_rate(settings, monkeypatch):
    settings.PERDURA_RATE_LIMITS = "memory"
    settings.PERDURA_RETENTION_RATE = 10.0  # a token every 100 ms
    settings.PERDURA_SWEEP_SECONDS = 0.2  # a burst of two
    monkeypatch.setattr(retention_pace, "GROUPS_PER_SECOND", 5)  # groups of two
    runs = _runs_on_one_shard(12)
    shard = runs[0].shard
    lease = leases.acquire(shard, "w")
    assert lease is not None

    # perdura dev's loop does not wait: the burst, then nothing.
    assert retention.process(shard, lease, budget=Budget(0.5)) == 2
    retention_pace.reset()
    time.sleep(0.25)  # the bucket full again
    began = time.monotonic()
    deleted = retention.process(shard, lease, budget=Budget(0.5, may_wait=True))
    elapsed = time.monotonic() - began
    assert deleted > 2  # it waited for tokens rather than end its pass
    assert deleted <= 2 + 10 * elapsed + 1  # the burst and the rate, no more


def test_a_run_pays_its_token_once(settings, monkeypatch):
    """A run a spent budget (or a crash) left part way through its deletion goes on without a token."""
    settings.PERDURA_RATE_LIMITS = "memory"
    settings.PERDURA_RETENTION_RATE = 2.0
    settings.PERDURA_SWEEP_SECONDS = 1.0  # a burst of two
    runs = _runs_on_one_shard(5)
    Retention.objects.filter(execution_id=runs[0].pk).update(step=Step.VISIBILITY)
    shard = runs[0].shard
    lease = leases.acquire(shard, "w")
    assert lease is not None
    assert retention.process(shard, lease) == 3  # the one started, and two paid for
    assert remaining_rows(runs[0]) == {}


def test_a_group_archived_on_a_spent_budget_is_still_deleted():
    runs = _runs_on_one_shard(3)
    lease = leases.acquire(runs[0].shard, "w")
    assert lease is not None
    rows = list(Retention.objects.filter(execution_id__in=[r.pk for r in runs]))
    assert retention._delete_group(rows, runs[0].shard, lease, Budget(0.0)) == 3
    for run in runs:
        assert remaining_rows(run) == {}


def test_unpaced_the_whole_backlog_goes_in_groups_of_a_hundred(settings):
    settings.PERDURA_RETENTION_RATE = 0.0
    assert retention_pace.group_size() == retention_pace.GROUP_MOST
    runs = _runs_on_one_shard(5)
    lease = leases.acquire(runs[0].shard, "w")
    assert lease is not None
    assert retention.process(runs[0].shard, lease) == 5
    assert retention_pace.ready()


def test_the_rate_setting_takes_off_or_a_positive_number(monkeypatch):
    import importlib

    from perdura import settings as perdura_settings

    for value, expected in (("off", 0.0), ("0", 0.0), ("150", 150.0)):
        monkeypatch.setenv("PERDURA_RETENTION_RATE", value)
        rate = importlib.reload(perdura_settings).PERDURA_RETENTION_RATE
        assert rate == expected
    monkeypatch.setenv("PERDURA_RETENTION_RATE", "fast")
    with pytest.raises(SystemExit, match="PERDURA_RETENTION_RATE must be a positive number"):
        importlib.reload(perdura_settings)
    monkeypatch.delenv("PERDURA_RETENTION_RATE")
    importlib.reload(perdura_settings)
