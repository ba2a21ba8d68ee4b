"""The operator's read-only view: `perdura org list`, `perdura namespace list|describe` and `perdura status`.

Each prints a table for a person or, with --json, one JSON object a line (`status` and `describe`: one
object) for scripts. Every count is an indexed query, so these stay cheap on a large database.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata
from typing import Any, NoReturn

from perdura import bootstrap


def _fail(message: str) -> NoReturn:
    raise SystemExit(f"perdura: {message}")


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, separators=(",", ":"), default=str) + "\n")


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        sys.stdout.write("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def _org_list(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from django.db.models import Count, Q

    from tenants.models import Organization

    orgs = Organization.objects.order_by("slug").annotate(
        members=Count("memberships", distinct=True),
        owners=Count("memberships", filter=Q(memberships__role="owner"), distinct=True),
        namespace_count=Count("namespaces", distinct=True),
    )
    entries = [
        {
            "slug": o.slug,
            "name": o.name,
            "members": o.members,
            "owners": o.owners,
            "namespaces": o.namespace_count,
            "created_at": o.created_at.isoformat(timespec="seconds"),
        }
        for o in orgs
    ]
    if args.json:
        for entry in entries:
            _print_json(entry)
        return
    _table(
        [
            [e["slug"], e["name"], e["members"], e["owners"], e["namespaces"], e["created_at"]]
            for e in entries
        ],
        ["ORG", "NAME", "MEMBERS", "OWNERS", "NAMESPACES", "CREATED"],
    )
    sys.stderr.write(f"{len(entries)} organisations\n")


def _namespace_summary(namespace: Any) -> dict[str, Any]:
    from tenants import api_keys

    return {
        "name": namespace.name,
        "id": str(namespace.id),
        "organization": namespace.organization.slug if namespace.organization else None,
        "state": namespace.State(namespace.state).name.lower(),
        "retention_days": namespace.retention_days,
        "retention_seconds": int(namespace.retention.total_seconds()),
        "retention": api_keys.format_duration(namespace.retention),
        "description": namespace.description,
        "created_at": namespace.created_at.isoformat(timespec="seconds"),
    }


def _namespace_list(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from tenants import selectors
    from tenants.models import Namespace

    query = Namespace.objects.select_related("organization").order_by("name")
    if args.org:
        organization = selectors.organization_by_slug(args.org)
        if organization is None:
            _fail(f"no organisation {args.org!r} (see `perdura org list`)")
        query = query.filter(organization=organization)
    entries = [_namespace_summary(n) for n in query]
    if args.json:
        for entry in entries:
            _print_json(entry)
        return
    _table(
        [
            [
                e["name"],
                e["organization"] or "(operator)",
                e["state"],
                e["retention"],
                e["created_at"],
            ]
            for e in entries
        ],
        ["NAMESPACE", "ORG", "STATE", "RETENTION", "CREATED"],
    )
    sys.stderr.write(f"{len(entries)} namespaces\n")


def _namespace_describe(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from django.db.models import Count, Q

    from engine.models import Execution, HistoryArchive
    from tenants import quotas
    from tenants.models import Namespace

    namespace = Namespace.objects.select_related("organization").filter(name=args.name).first()
    if namespace is None:
        _fail(f"no namespace {args.name!r} (see `perdura namespace list`)")
    runs = Execution.objects.filter(namespace=namespace).aggregate(
        open=Count("pk", filter=Q(close_time__isnull=True)),
        closed=Count("pk", filter=Q(close_time__isnull=False)),
    )
    rates = quotas.namespace_rates(namespace.rate_limits)
    data_key = namespace.data_keys.order_by("-version").first()
    entry = {
        **_namespace_summary(namespace),
        "owner_email": namespace.owner_email,
        "rate_limits": {
            b.value: {"rps": rates.rps[b], "default": b not in rates.overridden} for b in quotas.LIMITED
        },
        "retry_jitter": namespace.retry_jitter,
        "on_retries_exhausted": namespace.on_retries_exhausted,
        "data_key_version": data_key.version if data_key else None,
        "runs": {"open": runs["open"], "closed": runs["closed"]},
        "archival": {
            what: {
                "state": "enabled" if getattr(namespace, f"{what}_archival_state") == 2 else "disabled",
                "uri": getattr(namespace, f"{what}_archival_uri"),
            }
            for what in ("history", "visibility")
        },
        "archived_runs": HistoryArchive.objects.filter(namespace=namespace).count(),
    }
    if args.json:
        _print_json(entry)
        return
    limits = ", ".join(
        f"{name} {v['rps']:g}/s{' (default)' if v['default'] else ''}"
        for name, v in entry["rate_limits"].items()
    )
    for label, value in [
        ("namespace", entry["name"]),
        ("id", entry["id"]),
        ("organisation", entry["organization"] or "(operator)"),
        ("state", entry["state"]),
        ("description", entry["description"] or "-"),
        ("owner email", entry["owner_email"] or "-"),
        ("retention", entry["retention"]),
        ("rate limits", limits),
        (
            "retry jitter",
            "off" if entry["retry_jitter"] == 0 else f"up to {entry['retry_jitter']:.0%} of each backoff",
        ),
        ("exhausted", f"{entry['on_retries_exhausted']} (activities whose retries are exhausted)"),
        ("data key", f"version {entry['data_key_version']}"),
        (
            "archival",
            "; ".join(
                f"{what} {a['state']}{' (' + a['uri'] + ')' if a['uri'] else ''}"
                for what, a in entry["archival"].items()
            )
            + f"; {entry['archived_runs']} runs archived",
        ),
        ("runs", f"{runs['open']} open, {runs['closed']} closed (in the hot store)"),
        ("created", entry["created_at"]),
    ]:
        sys.stdout.write(f"{label + ':':<14}{value}\n")


def status_report() -> dict[str, Any]:
    """What `perdura status` prints: version, migrations, shard leases, backlogs and parked rows."""
    from django.conf import settings
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.db.models import Count, Min

    from engine.models import ShardLease, Timer, Transfer
    from engine.shards import parking
    from perdura import clock

    now = clock.now()
    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    leases = {lease.shard: lease for lease in ShardLease.objects.all()}
    live_timers = Timer.objects.filter(parked_at__isnull=True)
    due = dict(live_timers.filter(fire_at__lte=now).values_list("shard").annotate(n=Count("pk")))
    oldest_due = live_timers.filter(fire_at__lte=now).aggregate(first=Min("fire_at"))["first"]
    waiting = dict(live_timers.filter(fire_at__gt=now).values_list("shard").annotate(n=Count("pk")))
    transfers = dict(
        Transfer.objects.filter(parked_at__isnull=True).values_list("shard").annotate(n=Count("pk"))
    )
    shards = []
    for shard in range(settings.PERDURA_SHARDS):
        lease = leases.get(shard)
        held = (
            lease is not None
            and bool(lease.owner)
            and lease.expires_at is not None
            and lease.expires_at > now
        )
        shards.append(
            {
                "shard": shard,
                "owner": lease.owner if held and lease else None,
                "range_id": lease.range_id if lease else 0,
                "timers_due": due.get(shard, 0),
                "timers_waiting": waiting.get(shard, 0),
                "transfers": transfers.get(shard, 0),
            }
        )
    return {
        "version": metadata.version("perdura"),
        "database": connection.vendor,
        "migrations_pending": [f"{m.app_label}.{m.name}" for m, _ in pending],
        "shards": shards,
        "timers_due": sum(due.values()),
        "oldest_due_timer_late_seconds": (now - oldest_due).total_seconds() if oldest_due else 0.0,
        "transfers": sum(transfers.values()),
        "parked": parking.parked_counts(),
    }


def _status(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    report = status_report()
    if args.json:
        _print_json(report)
        return
    pending = report["migrations_pending"]
    sys.stdout.write(f"perdura {report['version']} on {report['database']}\n")
    sys.stdout.write(
        f"migrations: {'all applied' if not pending else f'{len(pending)} pending: ' + ', '.join(pending)}\n"
    )
    sys.stdout.write(
        f"backlog: {report['timers_due']} timers due (oldest {report['oldest_due_timer_late_seconds']:.1f}s late), "
        f"{report['transfers']} transfers\n"
    )
    parked = report["parked"]
    sys.stdout.write("parked rows: " + ", ".join(f"{q} {n}" for q, n in parked.items()) + "\n")
    _table(
        [
            [
                s["shard"],
                s["owner"] or "-",
                s["range_id"],
                s["timers_due"],
                s["timers_waiting"],
                s["transfers"],
            ]
            for s in report["shards"]
        ],
        ["SHARD", "OWNER", "RANGE", "TIMERS DUE", "TIMERS LATER", "TRANSFERS"],
    )
    if pending:
        raise SystemExit(1)


def add_org_parsers(org_sub: argparse._SubParsersAction) -> None:
    listing = org_sub.add_parser("list", help="list organisations with their members and namespaces")
    listing.add_argument("--json", action="store_true", help="one JSON object a line")
    listing.set_defaults(func=_org_list)


def add_namespace_parsers(ns_sub: argparse._SubParsersAction) -> None:
    listing = ns_sub.add_parser("list", help="list namespaces (all, or one organisation's)")
    listing.add_argument("--org", help="only this organisation's")
    listing.add_argument("--json", action="store_true", help="one JSON object a line")
    listing.set_defaults(func=_namespace_list)
    describe = ns_sub.add_parser("describe", help="a namespace's settings, limits, data key and run counts")
    describe.add_argument("name", help="the full name (NAME.ORG)")
    describe.add_argument("--json", action="store_true", help="one JSON object")
    describe.set_defaults(func=_namespace_describe)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser(
        "status", help="shards and their owners, backlogs, parked rows, version and migrations"
    )
    status.add_argument("--json", action="store_true", help="one JSON object")
    status.set_defaults(func=_status)
