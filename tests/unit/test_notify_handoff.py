"""A poll that stands ready to be handed a task (engine/services/task_handoff.py) and the hub's wake-ups
never both take one poll: a reserved poll is woken for no task row, and a woken one is not reserved."""

from __future__ import annotations

import asyncio
import logging

from engine import notify

KEY = notify.task_queue_key("ns", 2, "orders")


def _ready(hub: notify.Hub) -> notify.Waiter:
    waiter = hub.waiter(KEY)
    waiter.offer = lambda execution, m, task: "started"
    waiter.begin_idle()
    return waiter


async def test_a_reserved_poll_is_not_woken_for_a_task_row_and_another_is():
    hub = notify.Hub()
    reserved, other = _ready(hub), _ready(hub)
    assert hub.reserve(KEY) is reserved
    hub.publish({KEY: 1})
    await asyncio.sleep(0)
    assert (reserved.fired, other.fired) == (False, True)
    assert hub.reserve(KEY) is None  # the other was woken: it is claiming the row


async def test_only_a_poll_that_is_waiting_and_stands_ready_is_reserved():
    hub = notify.Hub()
    claiming = hub.waiter(KEY)
    claiming.offer = lambda execution, m, task: "started"  # ready, but not waiting (claiming)
    versioned = hub.waiter(KEY, group="d\x1f1.0")
    versioned.offer = claiming.offer
    versioned.begin_idle()
    plain = hub.waiter(KEY)  # no offer: it takes tasks only from the queue
    plain.begin_idle()
    assert hub.reserve(KEY) is None
    for waiter in (claiming, versioned, plain):
        waiter.close()


async def test_a_handed_poll_gets_its_answer_and_leaving_passes_no_wake_up_on():
    hub = notify.Hub()
    handed, idle = _ready(hub), _ready(hub)
    assert hub.reserve(KEY) is handed
    settled = asyncio.ensure_future(handed.settle())
    await asyncio.sleep(0.01)
    assert not settled.done()  # held: it waits for the reserving transaction
    handed.hand("the answer")
    await asyncio.wait_for(settled, 1)
    assert handed.handed == "the answer"
    handed.close()
    await asyncio.sleep(0)
    assert not idle.fired


async def test_a_released_poll_waits_on_as_before():
    hub = notify.Hub()
    waiter = _ready(hub)
    assert hub.reserve(KEY) is waiter
    settled = asyncio.ensure_future(waiter.settle())
    await asyncio.sleep(0)
    waiter.release()
    await asyncio.wait_for(settled, 1)
    assert waiter.handed is None
    waiter.begin_idle()
    assert hub.reserve(KEY) is waiter


async def test_an_answer_for_a_poll_that_left_is_logged(caplog):
    hub = notify.Hub()
    waiter = _ready(hub)
    assert hub.reserve(KEY) is waiter
    waiter.close()  # its caller went away while the transaction ran
    with caplog.at_level(logging.WARNING, logger="perdura.api"):
        waiter.hand("the answer")
    assert "whose caller went away" in caplog.text
