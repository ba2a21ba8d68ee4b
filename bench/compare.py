"""Side-by-side comparison of Temporal-API servers, measured in one invocation.

Runs each scenario of ``bench/throughput.py`` against each address in turn (A then B, scenario by
scenario, each with its own fresh worker and task queue; with ``--rounds`` repeated in alternating order)
and prints, per scenario, throughput and start / end-to-end latency for every address plus the ratio
B/A (medians over the rounds). Throughput ratios above 1 mean B is faster; latency ratios above 1 mean B
is slower. Because both servers are measured by the same process on the same machine minutes apart, the
ratios are more meaningful than absolute figures from separate runs.

Usage::

    python bench/compare.py --addresses 127.0.0.1:7233,127.0.0.1:7320 \\
        --scenarios one_activity,ten_activities [--rounds 1] [--workflows 200] [--concurrency 50] \\
        [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Callable

from throughput import (
    SCENARIOS,
    BenchResult,
    add_connection_arguments,
    exit_without_finalizing,
    parse_pids,
    run_benchmark,
)

EAGER = "+eager"
"""A scenario name with this suffix runs with the SDK's eager activity execution on (its default)."""

# (label, getter); throughput is higher-is-better, latencies and errors lower-is-better.
METRICS: list[tuple[str, Callable[[BenchResult], float]]] = [
    ("workflows/s", lambda r: r.workflows_per_s),
    ("start p50 ms", lambda r: r.start_ms.p50),
    ("start p99 ms", lambda r: r.start_ms.p99),
    ("e2e p50 ms", lambda r: r.e2e_ms.p50),
    ("e2e p99 ms", lambda r: r.e2e_ms.p99),
    ("bench cpu s", lambda r: r.client_cpu_s),
    ("server cpu ms/wf", lambda r: r.server_cpu_ms_per_workflow),
    ("errors", lambda r: float(r.errors)),
]


def _ratio(a: float, b: float) -> str:
    if a == 0 or a != a or b != b:  # zero or NaN
        return "-"
    return f"{b / a:.2f}x"


def _letter(index: int) -> str:
    return chr(ord("A") + index)


def format_table(
    addresses: list[str], results: dict[tuple[str, int], list[BenchResult]], scenarios: list[str]
) -> str:
    """One row per (scenario, metric): the value for each address, then X/A for every address X after A.

    With several rounds, each value is the median over the rounds.
    """
    labels = [f"{_letter(i)} {addr}" for i, addr in enumerate(addresses)]
    ratio_headers = [f"{_letter(i)}/A" for i in range(1, len(addresses))]
    header = ["scenario", "metric", *labels, *ratio_headers]
    rows: list[list[str]] = []
    for scenario in scenarios:
        for name, get in METRICS:
            values = [
                statistics.median(get(r) for r in results[(scenario, i)]) for i in range(len(addresses))
            ]
            cells = [f"{v:.0f}" if name == "errors" else f"{v:.2f}" for v in values]
            if name.startswith("server cpu") and all(v != v for v in values):  # NaN: no --server-pids
                continue
            ratios = [_ratio(values[0], v) for v in values[1:]]
            rows.append([scenario, name, *cells, *ratios])
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first, second, *rest = cells
        return "  ".join(
            [first.ljust(widths[0]), second.ljust(widths[1])]
            + [c.rjust(w) for c, w in zip(rest, widths[2:], strict=True)]
        )

    out = [line(header), "  ".join("-" * w for w in widths)]
    previous = None
    for row in rows:
        if previous is not None and row[0] != previous:
            out.append("")
        out.append(line(row))
        previous = row[0]
    return "\n".join(out)


async def _compare(
    args: argparse.Namespace, addresses: list[str], scenarios: list[str]
) -> dict[tuple[str, int], list[BenchResult]]:
    """Results keyed by (scenario, address index), one per round: the same address may be listed twice.

    Odd rounds run the addresses in reverse order (A B, B A, A B, ...), so that a server drifting during
    the run (warming up, or slowing down as its store fills) does not always favour the same side.
    """
    results: dict[tuple[str, int], list[BenchResult]] = {}
    server_pids = [parse_pids(group) for group in args.server_pids.split(",")] if args.server_pids else []
    for scenario in scenarios:
        for round_no in range(args.rounds):
            order = list(enumerate(addresses))
            if round_no % 2:
                order.reverse()
            for index, address in order:
                print(
                    f"running {scenario} round {round_no + 1}/{args.rounds} against {_letter(index)} {address}",
                    file=sys.stderr,
                    flush=True,
                )
                results.setdefault((scenario, index), []).append(
                    await run_benchmark(
                        address=address,
                        scenario=scenario.removesuffix(EAGER),
                        namespace=args.namespace,
                        workflows=args.workflows,
                        concurrency=args.concurrency,
                        warmup=args.warmup,
                        api_key=args.api_key,
                        tls=args.tls,
                        timeout_s=args.timeout,
                        eager_activities=args.eager_activities or scenario.endswith(EAGER),
                        server_pids=server_pids[index] if server_pids else None,
                    )
                )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--addresses", required=True, help="comma-separated host:port list, A first")
    parser.add_argument(
        "--scenarios",
        default="one_activity,ten_activities",
        help=f"comma-separated, from {','.join(SCENARIOS)}; a {EAGER} suffix turns eager activities on "
        "(one_activity,one_activity+eager measures both ways)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat, alternating the order; report medians (default 1)"
    )
    parser.add_argument("--json", dest="json_path", default=None, help="also write every result here")
    parser.add_argument(
        "--server-pids",
        default="",
        help="per address, comma-separated, each server's process ids joined by '+' (descendants count too): "
        "adds server CPU per workflow",
    )
    add_connection_arguments(parser)
    args = parser.parse_args(argv)

    addresses = [a.strip() for a in args.addresses.split(",") if a.strip()]
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if len(addresses) < 2:
        parser.error("--addresses needs at least two addresses (they may be identical)")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    unknown = [s for s in scenarios if s.removesuffix(EAGER) not in SCENARIOS]
    if args.server_pids and len(args.server_pids.split(",")) != len(addresses):
        parser.error("--server-pids needs one group of pids per address")
    if unknown or not scenarios:
        parser.error(f"unknown scenarios {unknown}; choose from {', '.join(SCENARIOS)}")

    results = asyncio.run(_compare(args, addresses, scenarios))
    medians = " (medians)" if args.rounds > 1 else ""
    print(
        f"workflows {args.workflows}, concurrency {args.concurrency}, warm-up {args.warmup}, "
        f"rounds {args.rounds}{medians}"
    )
    print(format_table(addresses, results, scenarios))
    if args.json_path:
        payload = {
            "addresses": addresses,
            "scenarios": scenarios,
            "rounds": args.rounds,
            "results": [
                {"address_index": i, "round": n + 1, **result.to_json()}
                for s in scenarios
                for i in range(len(addresses))
                for n, result in enumerate(results[(s, i)])
            ],
        }
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2)
            fh.write("\n")
    return 1 if any(r.errors for runs in results.values() for r in runs) else 0


if __name__ == "__main__":
    exit_without_finalizing(main())
