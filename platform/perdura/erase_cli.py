"""`perdura erase`: erasure by key destruction of one data subject in one namespace (README, Erasure)."""

from __future__ import annotations

import argparse


def _erase(args: argparse.Namespace) -> None:
    from perdura import bootstrap
    from perdura.control import _fail

    bootstrap.setup(operator=True)
    from engine.exports import erasure
    from tenants import selectors

    namespace = selectors.namespace_by_name(args.namespace)
    if namespace is None:
        _fail(f"no namespace named {args.namespace!r}")
        return
    try:
        done = erasure.subject_erase(namespace=namespace, subject=args.subject)
    except ValueError as e:
        _fail(str(e))
        return
    print(
        f"{namespace.name}: subject {done.subject!r} erased: {len(done.key_ids)} key(s) destroyed, "
        f"{len(done.terminated)} running run(s) terminated"
    )
    for workflow_id, run_id in done.terminated:
        print(f"terminated {workflow_id} {run_id}")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    erase = sub.add_parser(
        "erase",
        help="destroy a data subject's key (PerduraDataSubject): its payloads become unreadable everywhere",
    )
    erase.add_argument("--namespace", required=True, help="the namespace's full name")
    erase.add_argument("--subject", required=True, help="the PerduraDataSubject value")
    erase.set_defaults(func=_erase)
