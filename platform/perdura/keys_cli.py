"""Key rotation commands: `perdura namespace rotate-key|reencrypt` and `perdura masterkey rotate`.

Both rotations are online: the servers keep running, and every ciphertext stays readable throughout
(tenants/datakeys.py and engine/persistence/reencrypt.py say how).
"""

from __future__ import annotations

import argparse
import sys
import time

from perdura import progress

COMMIT_MARGIN = 2.0
"""Seconds beyond PERDURA_DATAKEY_REFRESH_SECONDS: a write sealed just before a process refreshed commits
within it."""


def _namespace(name: str):  # type: ignore[no-untyped-def]
    from perdura.control import _fail
    from tenants import selectors

    namespace = selectors.namespace_by_name(name)
    if namespace is None:
        _fail(f"no namespace named {name!r}")
    return namespace


def _reencrypt_now(namespace, *, status_only: bool = False) -> None:  # type: ignore[no-untyped-def]
    from engine.models import Reencryption
    from engine.persistence import reencrypt

    if status_only:
        job = Reencryption.objects.filter(namespace_id=namespace.id).order_by("-started_at").first()
        if job is None:
            print(f"{namespace.name}: no re-encryption has run")
            return
        p = reencrypt.progress_of(job)
        state = f"finished {job.finished_at:%Y-%m-%d %H:%M:%S}" if p.finished else "under way"
        print(
            f"{namespace.name}: towards data key version {job.target_version}, {state}: "
            f"{p.runs_done}/{p.runs_total} runs, {p.rewritten} ciphertexts sealed again; "
            f"{reencrypt.stale_count(namespace.id)} under older versions now"
        )
        return
    job = reencrypt.start(namespace.id)
    started = time.monotonic()
    bar = progress.Bar(f"re-encrypting {namespace.name} to data key version {job.target_version}: runs")
    result = reencrypt.run(job, on_progress=lambda p: bar.show(p.runs_done, p.runs_total))
    bar.show(result.runs_done, result.runs_total, last=True)
    print(
        f"{namespace.name}: {result.rewritten} ciphertexts sealed again under version {job.target_version} "
        f"in {time.monotonic() - started:.2f}s"
    )


def _rotate_key(args: argparse.Namespace) -> None:
    from perdura import bootstrap, env

    bootstrap.setup(operator=True)
    from tenants import audit, datakeys

    namespace = _namespace(args.name)
    key = datakeys.datakey_create(namespace=namespace)
    audit.record_change(
        action="namespace.rotate_key",
        target=f"namespace/{namespace.name}",
        namespace=namespace,
        details={"data_key_version": key.version},
    )
    refresh = env.datakey_refresh_seconds()
    print(
        f"{namespace.name}: data key version {key.version} seals new writes (every process within {refresh:g} s)"
    )
    if args.no_reencrypt:
        print(f"Move old ciphertexts later with `perdura namespace reencrypt {namespace.name}`.")
        return
    # Until every process has read the new version, some still seal with the old one, and a scan that
    # passed their rows would leave them behind. Waiting out the refresh time (and a margin for the
    # transactions that sealed just before it to commit) closes that window.
    wait = refresh + COMMIT_MARGIN
    print(f"waiting {wait:g} s for every process to seal with version {key.version}...", file=sys.stderr)
    time.sleep(wait)
    _reencrypt_now(namespace)


def _reencrypt(args: argparse.Namespace) -> None:
    from perdura import bootstrap

    bootstrap.setup(operator=True)
    _reencrypt_now(_namespace(args.name), status_only=args.status)


def _masterkey_rotate(args: argparse.Namespace) -> None:
    from perdura import bootstrap, env
    from perdura.control import _fail

    bootstrap.setup(operator=True)
    from tenants import audit, datakeys

    if env.previous_master_key() is None:
        _fail(
            "set PERDURA_MASTER_KEY to the new master key and PERDURA_MASTER_KEY_PREVIOUS to the old one "
            "(the servers too, then restart them), and run this again"
        )
    bar = progress.Bar("re-wrapping data keys")
    result = datakeys.rewrap_all(progress=lambda done, total: bar.show(done, total))
    bar.show(1, 1, last=True)
    audit.record_change(
        action="masterkey.rotate",
        target=f"masterkey/{result.master_key_id}",
        details={"rewrapped": result.rewrapped},
    )
    left = datakeys.wrapped_by_other_keys()
    print(
        f"{result.rewrapped} data keys re-wrapped under master key {result.master_key_id} "
        f"({result.already_current} already were); {left} left"
    )
    if left:
        _fail("some data keys are still wrapped by another master key: run this again")
    print("Every data key is wrapped by PERDURA_MASTER_KEY: PERDURA_MASTER_KEY_PREVIOUS may now be removed.")


def add_namespace_parsers(ns_sub: argparse._SubParsersAction) -> None:
    rotate = ns_sub.add_parser(
        "rotate-key",
        help="start a new data key version for new writes, then move old ciphertexts to it (online)",
    )
    rotate.add_argument("name", help="the full name (NAME.ORG)")
    rotate.add_argument(
        "--no-reencrypt", action="store_true", help="only start the new version; re-encrypt later"
    )
    rotate.set_defaults(func=_rotate_key)
    again = ns_sub.add_parser(
        "reencrypt", help="move a namespace's ciphertexts to its current data key (resumes an unfinished run)"
    )
    again.add_argument("name", help="the full name (NAME.ORG)")
    again.add_argument("--status", action="store_true", help="show the last re-encryption's progress")
    again.set_defaults(func=_reencrypt)


def add_masterkey_parsers(masterkey: argparse.ArgumentParser) -> None:
    sub = masterkey.add_subparsers(dest="masterkey_command")
    rotate = sub.add_parser(
        "rotate",
        help="re-wrap every data key under PERDURA_MASTER_KEY (the old key in PERDURA_MASTER_KEY_PREVIOUS)",
    )
    rotate.set_defaults(func=_masterkey_rotate)
