"""A warm `perdura` for the operator commands a test runs against one server: python warm_cli.py.

Each `perdura org|namespace|apikey|...` a test ran was a new interpreter that imported Django, the SDK's
protos and Celery and set Django up, about 0.65 s of CPU each and a second of wall time on the busy CI
machine, for hundreds of commands. This process does that once, with the server's environment, then forks
a child per command that runs the real `perdura.cli.main` from there, so each command still starts from
the same clean state and nothing one leaves behind reaches the next.

Requests on standard input, one JSON list of arguments a line; answers on standard output, one JSON
object a line: {"returncode": ..., "stdout": ..., "stderr": ...}.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import tempfile
import threading
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

COMMANDS = frozenset({"org", "namespace", "apikey", "audit", "export", "erase", "shards"})
"""The operator commands (bootstrap.setup(operator=True)) served warm: they read the configuration as the
warm process set it up. The rest (migrate, visibility reindex, masterkey, ...) start as usual."""


WARMED = (
    "perdura.cli",
    "perdura.control",
    "perdura.export_cli",
    "perdura.shards_cli",
    "perdura.erase_cli",
    "perdura.inventory_cli",
    "perdura.keys_cli",
    "perdura.visibility_cli",
    "perdura.metrics_server",
    "tenants.api_keys",
    "tenants.selectors",
    "tenants.quotas",
    "tenants.services.namespaces",
    "tenants.services.organizations",
    "tenants.services.keys",
    "engine.shards.parking",
    "engine.exports.signing",
    "engine.exports.manifest",
)


def _run_child(argv: list[str], out_fd: int, err_fd: int) -> None:
    """In the forked child: the command's output to the two files, then exit with its status."""
    # The warm process's standard input is its stream of requests: never a command's to read.
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    code = 0
    try:
        from perdura import cli

        cli.main(argv)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            code = 1
        else:
            code = e.code or 0
    except BaseException:  # noqa: BLE001 - reported as the interpreter would, with status 1
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve_one(argv: list[str]) -> dict:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _run_child(argv, out.fileno(), err.fileno())
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return {
            "returncode": os.waitstatus_to_exitcode(status),
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
        }


def main() -> None:
    import importlib

    from django.db import connections
    from perdura import bootstrap

    bootstrap.setup(operator=True)
    # What the commands import on their way (the parsers' modules, the services they call): imported here
    # once, not in each child.
    for module in WARMED:
        importlib.import_module(module)
    # A fork copies every thread's memory but only the forking thread, and a connection would be shared
    # by every child: neither may exist here.
    assert threading.active_count() == 1, threading.enumerate()
    for line in sys.stdin:
        argv = json.loads(line)
        opened = [c.alias for c in connections.all(initialized_only=True) if c.connection is not None]
        assert not opened, f"the warm process opened a connection: {opened}"
        sys.stdout.write(json.dumps(_serve_one(argv)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
