"""Running Django ORM work from asyncio code (gRPC server, dev shard loop): a bounded pool, healthy connections."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import close_old_connections

T = TypeVar("T")
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def configure(max_workers: int) -> None:
    global _pool
    _pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="perdura-db")


def _call(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    close_old_connections()
    return fn(*args, **kwargs)


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn` on a database thread and await its result, in a copy of the caller's context (as
    asyncio.to_thread does), so context variables such as the audit log's actor reach it."""
    if _pool is None:
        configure(16)
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    return await loop.run_in_executor(_pool, functools.partial(context.run, _call, fn, args, kwargs))
