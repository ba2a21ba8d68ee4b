"""A new task on a task queue wakes one waiting poller of each group (worker deployment version)."""

from __future__ import annotations

import asyncio

from engine import notify


async def test_a_task_wakes_one_waiter_of_each_group_and_other_keys_wake_all():
    hub = notify.Hub()
    key = notify.task_queue_key("ns", 1, "orders")
    v1a, v1b = hub.waiter(key, group="d\x1f1.0"), hub.waiter(key, group="d\x1f1.0")
    v2 = hub.waiter(key, group="d\x1f2.0")
    plain = hub.waiter(key)
    run = hub.waiter("run/7")
    others = hub.waiter("run/7")

    hub.publish({key: 1})
    await asyncio.sleep(0)  # the wake-ups are scheduled on the loop
    assert [w.fired for w in (v1a, v1b, v2, plain)] == [True, False, True, True]

    hub.publish({key: 1})  # the next task: the first group's second waiter, the rest are still woken
    await asyncio.sleep(0)
    assert v1b.fired

    hub.publish({"run/7": 1})
    await asyncio.sleep(0)
    assert run.fired
    assert others.fired
    for w in (v1a, v1b, v2, plain, run, others):
        w.close()
