"""`perdura shards ...`: the operator's view of parked shard queue rows, and redriving them."""

from __future__ import annotations

import argparse
import json
import sys


def _parked(args: argparse.Namespace) -> None:
    from perdura import bootstrap

    bootstrap.setup(operator=True)
    from engine.shards import parking

    rows = parking.parked_list(namespace=args.namespace)
    if args.json:
        for row in rows:
            entry = {
                "id": row.id,
                "queue": row.queue,
                "shard": row.shard,
                "namespace": row.namespace,
                "workflow_id": row.workflow_id,
                "run_id": row.run_id,
                "kind": row.kind,
                "attempts": row.attempts,
                "last_error": row.last_error,
                "parked_at": row.parked_at.isoformat(),
            }
            sys.stdout.write(json.dumps(entry, separators=(",", ":")) + "\n")
        return
    for row in rows:
        error = row.last_error.replace("\n", " ")
        sys.stdout.write(
            f"{row.id}  queue={row.queue} shard={row.shard} namespace={row.namespace} "
            f"workflow_id={row.workflow_id} run_id={row.run_id or '-'} kind={row.kind} "
            f"attempts={row.attempts} parked_at={row.parked_at.isoformat(timespec='seconds')}\n"
            f"    {error[:300]}\n"
        )
    sys.stderr.write(f"{len(rows)} parked rows\n")


def _redrive(args: argparse.Namespace) -> None:
    if bool(args.all) == bool(args.ids):
        raise SystemExit("perdura: give either --all or the ids of parked rows (see `perdura shards parked`)")
    from perdura import bootstrap

    bootstrap.setup(operator=True)
    from engine.shards import parking

    try:
        count = parking.parked_redrive(ids=None if args.all else args.ids)
    except ValueError as e:
        raise SystemExit(f"perdura: {e}") from None
    sys.stdout.write(f"{count} parked rows made due again (attempts reset)\n")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register `shards parked` and `shards redrive` on the `perdura` command."""
    shards = sub.add_parser("shards", help="shard queues: rows parked after repeated failures")
    shards_sub = shards.add_subparsers(dest="shards_command", required=True)
    parked = shards_sub.add_parser(
        "parked", help="list parked timer, transfer, visibility, schedule and batch rows"
    )
    parked.add_argument("--namespace", help="only this namespace (its full name)")
    parked.add_argument("--json", action="store_true", help="one JSON object per line")
    parked.set_defaults(func=_parked)
    redrive = shards_sub.add_parser("redrive", help="make parked rows due again, with their attempts reset")
    redrive.add_argument("ids", nargs="*", help="ids from `perdura shards parked` (e.g. timer:12)")
    redrive.add_argument("--all", action="store_true", help="every parked row")
    redrive.set_defaults(func=_redrive)
