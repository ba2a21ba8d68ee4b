"""What the gRPC metrics interceptor adds to a call: the wrapped handler against the bare one, in one process.

The machine this project is measured on is shared and two cores small, so an end-to-end comparison
(bench/compare.py) of a few percent drowns in its noise; this isolates the wrapper's own cost instead:
the bare coroutine and the measured one are awaited alternately in rounds, and the median per-call
difference is printed (with PROMETHEUS_MULTIPROC_DIR set, the multiprocess value files are measured).

Usage::

    python bench/metrics_overhead.py [--calls 100000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [
    str(Path(__file__).resolve().parents[1]),
    str(Path(__file__).resolve().parents[1] / "platform"),
]

import grpc  # noqa: E402
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr  # noqa: E402

from engine.api import metrics as api_metrics  # noqa: E402


class _Context:
    """What the wrapper reads of a servicer context: the code a handler set (none: OK)."""

    def code(self) -> None:
        return None


async def _handler(request: object, context: object) -> object:
    return request


async def _time(behavior, request, context, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        await behavior(request, context)
    return (time.perf_counter() - started) / calls


async def main(calls: int, rounds: int) -> None:
    bare = grpc.unary_unary_rpc_method_handler(_handler)
    measured = api_metrics._measured(bare, api_metrics._Series("StartWorkflowExecution")).unary_unary
    request, context = rr.StartWorkflowExecutionRequest(namespace="default"), _Context()
    differences, base = [], []
    for _ in range(rounds):
        plain = await _time(_handler, request, context, calls)
        wrapped = await _time(measured, request, context, calls)
        base.append(plain)
        differences.append(wrapped - plain)
    print(f"bare handler: {statistics.median(base) * 1e6:.2f} µs/call")
    print(
        f"metrics wrapper adds: {statistics.median(differences) * 1e6:.2f} µs/call (median of {rounds} rounds)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.rounds))
