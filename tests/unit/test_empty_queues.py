"""The hub remembers a task queue a claim found empty until a wake-up for it comes (engine/notify.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine import notify

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
KEY = notify.task_queue_key("ns", 1, "orders")


def test_an_empty_queue_is_known_until_a_wake_up_for_it():
    hub = notify.Hub()
    hub.mark_empty(KEY, hub.epoch(KEY), None, NOW)
    assert hub.known_empty(KEY, NOW) == NOW + notify.EMPTY_FOR
    assert hub.known_empty(notify.task_queue_key("ns", 2, "orders"), NOW) is None  # another kind

    hub.publish({"run/7": 1})  # not a task queue: the queue is still empty
    assert hub.known_empty(KEY, NOW) is not None
    hub.publish({notify.task_queue_key("ns", 1, "other"): 1})
    assert hub.known_empty(KEY, NOW) is not None
    hub.publish({KEY: 1})
    assert hub.known_empty(KEY, NOW) is None


def test_a_wake_up_during_the_claim_keeps_the_queue_unknown():
    """The claim read the queue before the new task committed: what it found is already stale."""
    hub = notify.Hub()
    since = hub.epoch(KEY)
    hub.publish({KEY: 1})
    hub.mark_empty(KEY, since, None, NOW)
    assert hub.known_empty(KEY, NOW) is None
    # A wake-up for another queue meanwhile changes nothing for this one.
    since = hub.epoch(KEY)
    hub.publish({notify.task_queue_key("ns", 1, "other"): 1})
    hub.mark_empty(KEY, since, None, NOW)
    assert hub.known_empty(KEY, NOW) is not None


def test_the_knowledge_lapses_after_a_while_and_when_a_later_task_becomes_visible():
    hub = notify.Hub()
    hub.mark_empty(KEY, hub.epoch(KEY), None, NOW)
    assert hub.known_empty(KEY, NOW + notify.EMPTY_FOR - timedelta(milliseconds=1)) is not None
    assert hub.known_empty(KEY, NOW + notify.EMPTY_FOR) is None  # a lost wake-up costs at most this

    soon = NOW + timedelta(milliseconds=300)
    hub.mark_empty(KEY, hub.epoch(KEY), soon, NOW)
    assert hub.known_empty(KEY, NOW) == soon  # the poll looks again then
    assert hub.known_empty(KEY, soon) is None

    hub.mark_empty(KEY, hub.epoch(KEY), NOW, NOW)  # visible now: nothing to remember
    assert hub.known_empty(KEY, NOW) is None


def test_the_memory_is_bounded():
    hub = notify.Hub()
    keys = [notify.task_queue_key("ns", 1, f"q{i}") for i in range(10_001)]
    for key in keys:
        hub.mark_empty(key, hub.epoch(key), None, NOW)
    assert hub.known_empty(keys[-1], NOW) is not None
    assert hub.known_empty(keys[0], NOW) is None

    # The wake-up counts are bounded too: clearing them voids every claim in flight, never validates one.
    since = hub.epoch(KEY)
    hub.publish({KEY: 1})  # a new task the claim may not have seen...
    hub.publish(dict.fromkeys(keys, 1))  # ...and the counts cleared after it: KEY's is back to what was noted
    assert hub.epoch(KEY)[1] == since[1]
    hub.mark_empty(KEY, since, None, NOW)
    assert hub.known_empty(KEY, NOW) is None


def test_a_notify_from_this_process_is_not_published_twice():
    """Its commit already woke this process's waiters; the listener drops the echo."""
    calls, params = notify.notify_calls({KEY: 2})
    assert calls == ["pg_notify(%s, %s)"]
    channel, payload = params
    assert channel == notify.CHANNEL
    assert notify.parse_payload(payload) is None
    other = payload.rsplit("|", 1)[0] + "|another-process"
    assert notify.parse_payload(other) == {KEY: 2}
    assert notify.parse_payload(f"{KEY}|3") == {KEY: 3}  # a process of an earlier release
    assert notify.parse_payload("tq/ns/1/a|b|4|another") == {"tq/ns/1/a|b": 4}  # a queue name with a bar
