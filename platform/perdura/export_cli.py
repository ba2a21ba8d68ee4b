"""`perdura export`: per-run compliance exports (run, and query for every run a filter matches), their
offline check (verify) and the signing key.

`verify`, `key` and `keygen` never set up Django nor open a database: an auditor checks a file with
only the package installed. `run` reads the run as the other operator commands do (PERDURA_DATABASE_URL).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from tenants.models import Namespace


def _signing_key() -> Ed25519PrivateKey:
    from engine.exports import signing

    try:
        return signing.signing_key()
    except signing.SigningKeyError as e:
        raise SystemExit(f"perdura: {e}") from None


def _cmd_run(args: argparse.Namespace) -> None:
    from perdura import bootstrap

    bootstrap.setup(operator=True)
    from engine.errors import FailedPrecondition, NotFound, Unavailable
    from engine.exports import gather, signing
    from tenants import selectors

    namespace = selectors.namespace_by_name(args.namespace)
    if namespace is None:
        raise SystemExit(f"perdura: no namespace {args.namespace!r}")
    started = time.monotonic()
    try:
        export = gather.build(namespace=namespace, workflow_id=args.workflow_id, run_id=args.run_id or "")
    except (NotFound, Unavailable, FailedPrecondition) as e:
        # The last two: an archived run whose store does not answer or whose archive does not open.
        raise SystemExit(f"perdura: {e}") from None
    except signing.SigningKeyError as e:
        raise SystemExit(f"perdura: {e}") from None
    data = json.dumps(export.document, ensure_ascii=False, separators=(",", ":")).encode()
    # Recorded before the file exists, as the REST view records before answering: no export leaves
    # unaudited (a failed write leaves an entry for an attempt, never a file without one).
    gather.record(namespace=namespace, export=export)
    Path(args.output).write_bytes(data)
    print(
        f"exported {args.namespace}/{export.workflow_id}/{export.run_id}: {export.events} events, "
        f"{export.audit_entries} audit entries, {len(data)} bytes in {time.monotonic() - started:.2f}s "
        f"to {args.output}",
        file=sys.stderr,
    )


def _visibility_token(namespace: Namespace) -> Callable[[], None]:
    """A function that waits for a token of the namespace's visibility bucket: the same bucket, limits
    and store (PERDURA_RATE_LIMITS) as the gRPC API's list queries."""
    from tenants import quotas
    from tenants.rest.throttles import limiter

    rate = quotas.namespace_rates(namespace.rate_limits or None).rate(quotas.Bucket.VISIBILITY)
    key = quotas.bucket_key(namespace.name, quotas.Bucket.VISIBILITY)

    def take() -> None:
        while True:
            decision = limiter().check(key, rate)
            if decision.allowed:
                return
            time.sleep(max(decision.retry_after, 0.01))

    return take


def _cmd_query(args: argparse.Namespace) -> None:
    from perdura import bootstrap, progress

    bootstrap.setup(operator=True)
    from engine.exports import bulk, destinations, signing
    from tenants import selectors
    from visibility.query.parser import QueryError

    namespace = selectors.namespace_by_name(args.namespace)
    if namespace is None:
        raise SystemExit(f"perdura: no namespace {args.namespace!r}")
    try:
        signing.signing_key()  # before anything is written: a missing key fails now, not at the first run
        destination = destinations.open_destination(args.to)
    except (signing.SigningKeyError, destinations.DestinationError) as e:
        raise SystemExit(f"perdura: {e}") from None
    bar = progress.Bar(f"exporting {args.namespace} runs")
    started = time.monotonic()
    try:
        result = bulk.export_query(
            namespace=namespace,
            query=args.query,
            destination=destination,
            take_token=_visibility_token(namespace),
            page_size=args.page_size,
            on_progress=lambda p: bar.show(p.done, max(p.total, p.done)),
        )
    except (QueryError, bulk.ExportConflict) as e:
        raise SystemExit(f"perdura: {e}") from None
    bar.show(result.done, max(result.total, result.done), last=True)
    print(
        f"exported {result.exported} runs of {args.namespace} matching {args.query!r} to {args.to} "
        f"({result.skipped} found already written after a stop, {result.vanished} deleted before they "
        f"could be read) in {time.monotonic() - started:.1f}s",
        file=sys.stderr,
    )


def _cmd_verify(args: argparse.Namespace) -> None:
    # Only the pure verifier: no Django, no database, no server.
    from engine.exports import manifest

    public_key = None
    if args.public_key:
        try:
            public_key = manifest.load_public_key(Path(args.public_key).read_bytes())
        except (OSError, ValueError) as e:
            raise SystemExit(f"perdura: --public-key {args.public_key}: {e}") from None
    try:
        document = json.loads(Path(args.file).read_bytes())
    except OSError as e:
        print(f"FAILED: cannot read {args.file}: {e}")
        raise SystemExit(1) from None
    except ValueError as e:
        print(f"FAILED: {args.file} is not JSON: {e}")
        raise SystemExit(1) from None
    verdict = manifest.verify(document, public_key=public_key)
    if not verdict.ok:
        print(f"FAILED: {verdict.message}")
        raise SystemExit(1)
    print(verdict.message)
    if not verdict.trusted_key:
        print(
            "note: checked with the key the file names; pass --public-key with the installation's "
            "published key to know it was signed by that installation",
            file=sys.stderr,
        )


def _cmd_key(args: argparse.Namespace) -> None:
    from perdura import bootstrap

    # Against a `perdura dev` database its signing key is the one kept beside it; no Django needed.
    bootstrap.dev_data_dir_beside_database()
    from engine.exports import manifest

    key = _signing_key()
    print(manifest.public_pem(key.public_key()), end="")
    print(f"fingerprint: {manifest.fingerprint(key.public_key())}", file=sys.stderr)


def _cmd_keygen(args: argparse.Namespace) -> None:
    from engine.exports import signing

    print(signing.generate())


def add_parsers(sub: argparse._SubParsersAction) -> None:
    export = sub.add_parser("export", help="per-run compliance exports: signed, verifiable offline")
    export_sub = export.add_subparsers(dest="export_command", required=True)

    run = export_sub.add_parser(
        "run", help="write one run's history, audit entries, attributes, links and signed manifest"
    )
    run.add_argument("--namespace", required=True, help="the namespace's full name")
    run.add_argument("--workflow-id", required=True)
    run.add_argument("--run-id", help="the run (default: the workflow id's current or latest run)")
    run.add_argument("--output", required=True, help="the file to write (JSON)")
    run.set_defaults(func=_cmd_run)

    query = export_sub.add_parser(
        "query",
        help="export every run a list filter matches, one signed file per run, to a folder or s3://bucket/prefix "
        "(resumes a stopped export)",
    )
    query.add_argument("--namespace", required=True, help="the namespace's full name")
    query.add_argument(
        "--query", required=True, help="a list filter, as in ListWorkflowExecutions ('' for all)"
    )
    query.add_argument(
        "--to", required=True, help="a folder, or s3://bucket/prefix (boto3's standard configuration)"
    )
    query.add_argument("--page-size", type=int, default=100, help=argparse.SUPPRESS)
    query.set_defaults(func=_cmd_query)

    verify = export_sub.add_parser(
        "verify", help="check an export's hash chain and signature offline (exit 1 naming what changed)"
    )
    verify.add_argument("file")
    verify.add_argument(
        "--public-key", help="PEM file of the installation's published key (default: the key the file names)"
    )
    verify.set_defaults(func=_cmd_verify)

    export_sub.add_parser(
        "key", help="print the installation's export signing public key (PEM), to publish"
    ).set_defaults(func=_cmd_key)
    export_sub.add_parser(
        "keygen", help="print a new signing key for PERDURA_EXPORT_SIGNING_KEY (base64 seed)"
    ).set_defaults(func=_cmd_keygen)
