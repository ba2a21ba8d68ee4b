"""The archive store threads (engine/archival/history.py): one pool a process, at a lower CPU priority."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from engine.archival import history


def _my_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(sys.platform != "linux", reason="nice is per thread on Linux only")
def test_store_threads_run_below_the_process_and_the_caller_keeps_its_priority():
    before = _my_nice()
    on_thread = history._store_pool().submit(_my_nice).result()
    assert on_thread == min(19, before + history.BACKGROUND_NICE)
    assert _my_nice() == before


def test_the_pool_is_made_once_a_process_and_anew_in_a_forked_child():
    pool = history._store_pool()
    assert history._store_pool() is pool
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child reports whether it made its own pool, and that the pool runs work
        fresh = history._store_pool()
        ok = fresh is not pool and fresh.submit(lambda: 42).result(timeout=10) == 42
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(child, 0)
    assert os.read(read, 1) == b"1"
    assert os.WEXITSTATUS(status) == 0
