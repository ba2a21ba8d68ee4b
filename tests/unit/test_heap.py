"""A serving process freezes what it started with, after collecting what of it is already garbage
(perdura/heap.py): full collections then skip the start-up heap."""

from __future__ import annotations

import gc
import weakref

from perdura import heap


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_start_up_garbage_is_collected_and_the_rest_frozen():
    gc.unfreeze()
    leftover = _Cycle()
    gone = weakref.ref(leftover)
    kept = _Cycle()
    del leftover  # garbage that only a collection finds (a reference cycle)
    try:
        heap.freeze_startup_objects()
        assert gone() is None, "start-up garbage was frozen, not collected"
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects()), "a live start-up object is still scanned"
    finally:
        gc.unfreeze()
