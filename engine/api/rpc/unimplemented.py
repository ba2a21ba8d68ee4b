"""The RPCs Perdura lacks: each answers UNIMPLEMENTED with its own name, not grpc's generic text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from engine.api.errors import aborting


def _unimplemented(name: str) -> Callable[[Any, Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[None]]:
    async def handler(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await aborting(context, grpc.StatusCode.UNIMPLEMENTED, f"Perdura does not implement {name} yet.")

    handler.__name__ = name
    return handler


def fill(servicer: type, base: type) -> None:
    """Give `servicer` an UNIMPLEMENTED handler for every method of the generated `base` it does not define."""
    for name, value in vars(base).items():
        if callable(value) and not name.startswith("_") and name not in vars(servicer):
            setattr(servicer, name, _unimplemented(name))
