"""Key rotation commands: `perdura namespace rotate-key|reencrypt` and `perdura masterkey rotate`.

A namespace's re-encryption runs in the shard workers (engine/shards/reencryption.py); these commands
queue it, and with `--wait` follow its progress. Both rotations are online: the servers keep running, and every ciphertext stays readable throughout
(tenants/datakeys.py and engine/persistence/reencrypt.py say how).
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from perdura import progress

if TYPE_CHECKING:
    from tenants.models import Namespace

WAIT_POLL_SECONDS = 0.2
"""How often `--wait` reads the job's progress."""


def _namespace(name: str) -> Namespace:
    from perdura.control import _fail
    from tenants import selectors

    namespace = selectors.namespace_by_name(name)
    if namespace is None:
        _fail(f"no namespace named {name!r}")
    return namespace


def _status(namespace: Namespace) -> None:
    from engine.persistence import reencrypt

    job = reencrypt.last_job(namespace.id)
    if job is None:
        print(f"{namespace.name}: no re-encryption has run")
        return
    p = reencrypt.progress_of(job)
    if p.finished:
        state = f"finished {job.finished_at:%Y-%m-%d %H:%M:%S}"
    elif job.parked_at is not None:
        state = f"parked after {job.failures} failed attempts ({job.last_error})"
    else:
        state = "queued" if job.runs_done == 0 else "under way"
    print(
        f"{namespace.name}: towards data key version {job.target_version}, {state}: "
        f"{p.runs_done}/{p.runs_total} runs, {p.rewritten} ciphertexts sealed again; "
        f"{reencrypt.stale_count(namespace.id)} under older versions now"
    )


def _queue(namespace: Namespace, *, wait: bool) -> None:
    """Queue the namespace's re-encryption for the shard workers, and with `wait` follow it to its end."""
    from engine.models import Reencryption
    from engine.persistence import reencrypt
    from perdura import clock
    from perdura.control import _fail

    job = reencrypt.start(namespace.id)
    delay = max((job.next_wakeup_at - clock.now()).total_seconds(), 0.0) if job.next_wakeup_at else 0.0
    print(
        f"{namespace.name}: re-encryption to data key version {job.target_version} queued for the shard "
        f"workers" + (f" (starts in {delay:.0f} s, once every process seals with it)" if delay >= 1 else "")
    )
    if not wait:
        print(f"Follow it with `perdura namespace reencrypt {namespace.name} --status` (or --wait).")
        return
    started = time.monotonic()
    bar = progress.Bar(f"re-encrypting {namespace.name} to data key version {job.target_version}: runs")
    while True:
        job = Reencryption.objects.get(pk=job.pk)
        if job.finished_at is not None:
            break
        if job.parked_at is not None:
            _fail(
                f"the re-encryption is parked after {job.failures} failed attempts: {job.last_error} "
                f"(`perdura shards redrive reencryption:{job.pk}` retries it)"
            )
        bar.show(job.runs_done, max(job.runs_total, 1))
        time.sleep(WAIT_POLL_SECONDS)
    bar.show(job.runs_done, job.runs_total, last=True)
    # From when the job was due (not from the wait for every process to seal with the new version).
    moving = max(time.monotonic() - started - delay, 0.0)
    print(
        f"{namespace.name}: {job.rewritten} ciphertexts sealed again under version {job.target_version} "
        f"in {moving:.2f}s"
    )


def _rotate_key(args: argparse.Namespace) -> None:
    from perdura import bootstrap, env

    bootstrap.setup(operator=True)
    from tenants import datakeys

    namespace = _namespace(args.name)
    key = datakeys.datakey_rotate(namespace=namespace)
    refresh = env.datakey_refresh_seconds()
    print(
        f"{namespace.name}: data key version {key.version} seals new writes (every process within {refresh:g} s)"
    )
    if args.no_reencrypt:
        print(f"Move old ciphertexts later with `perdura namespace reencrypt {namespace.name}`.")
        return
    # The job is due only once every process has read the new version (and the transactions that sealed
    # just before it have committed): a scan that passed rows still sealed with the old one would leave
    # them behind.
    _queue(namespace, wait=args.wait)


def _reencrypt(args: argparse.Namespace) -> None:
    from perdura import bootstrap

    bootstrap.setup(operator=True)
    namespace = _namespace(args.name)
    if args.status:
        _status(namespace)
    else:
        _queue(namespace, wait=args.wait)


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


_WAIT_HELP = "follow the queued re-encryption's progress until the workers finish it"


def add_namespace_parsers(ns_sub: argparse._SubParsersAction) -> None:
    rotate = ns_sub.add_parser(
        "rotate-key",
        help="start a new data key version for new writes, then move old ciphertexts to it (online)",
    )
    rotate.add_argument("name", help="the full name (NAME.ORG)")
    rotate.add_argument(
        "--no-reencrypt", action="store_true", help="only start the new version; re-encrypt later"
    )
    rotate.add_argument("--wait", action="store_true", help=_WAIT_HELP)
    rotate.set_defaults(func=_rotate_key)
    again = ns_sub.add_parser(
        "reencrypt",
        help="queue the move of a namespace's ciphertexts to its current data key for the shard workers "
        "(answers the unfinished job if there is one)",
    )
    again.add_argument("name", help="the full name (NAME.ORG)")
    again.add_argument("--status", action="store_true", help="show the last re-encryption's progress")
    again.add_argument("--wait", action="store_true", help=_WAIT_HELP)
    again.set_defaults(func=_reencrypt)


def add_masterkey_parsers(masterkey: argparse.ArgumentParser) -> None:
    sub = masterkey.add_subparsers(dest="masterkey_command")
    rotate = sub.add_parser(
        "rotate",
        help="re-wrap every data key under PERDURA_MASTER_KEY (the old key in PERDURA_MASTER_KEY_PREVIOUS)",
    )
    rotate.set_defaults(func=_masterkey_rotate)
