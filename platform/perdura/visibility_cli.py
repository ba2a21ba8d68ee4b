"""`perdura visibility ...`: operator commands of the visibility store (rebuilding the OpenSearch index)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO


class ProgressBar:
    """A one-line progress bar on a terminal (a line per 10% when the output is not a terminal)."""

    def __init__(self, label: str, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.label = label
        self.stream = stream
        self.width = width
        self.started = time.monotonic()
        self.tty = stream.isatty()
        self._shown_tenth = -1

    def __call__(self, done: int, total: int) -> None:
        fraction = min(done / total, 1.0) if total else 1.0
        rate = done / max(time.monotonic() - self.started, 1e-6)
        filled = int(self.width * fraction)
        line = (
            f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done:,}/{total:,} runs "
            f"{fraction:6.1%} {rate:,.0f}/s"
        )
        if self.tty:
            self.stream.write("\r" + line)
        elif int(fraction * 10) != self._shown_tenth:
            self._shown_tenth = int(fraction * 10)
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _reindex(args: argparse.Namespace) -> None:
    from perdura import bootstrap

    bootstrap.setup()
    from engine.shards import visibility_index

    bar = ProgressBar("reindex")
    try:
        result = visibility_index.reindex(fresh=args.fresh, batch=args.batch, progress=bar)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    finally:
        bar.close()
    sys.stdout.write(
        f"indexed {result.total:,} runs into {result.index!r} "
        f"({result.written:,} documents taken or already current, {result.refused:,} refused)\n"
    )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register `visibility` on the `perdura` command."""
    vis = sub.add_parser("visibility", help="manage the visibility store")
    vis_sub = vis.add_subparsers(dest="visibility_command", required=True)
    reindex = vis_sub.add_parser(
        "reindex", help="write every run's visibility record from the database to OpenSearch"
    )
    reindex.add_argument(
        "--fresh",
        action="store_true",
        help="build a new index, switch the alias to it and drop the old one (removes stray documents)",
    )
    reindex.add_argument("--batch", type=int, default=500, help="runs per bulk request (default 500)")
    reindex.set_defaults(func=_reindex)
