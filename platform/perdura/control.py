"""The control-plane commands of `perdura`: org, namespace, apikey, audit (bootstrap and scripting).

They read the same configuration as the servers (PERDURA_DATABASE_URL), so they work against a
running `perdura dev --db-file F` with PERDURA_DATABASE_URL=sqlite:///F, or a production database.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, NoReturn

from perdura import bootstrap, inventory_cli

if TYPE_CHECKING:
    from tenants.models import ApiKey, Organization


def _fail(message: str) -> NoReturn:
    raise SystemExit(f"perdura: {message}")


def _organization(slug: str) -> Organization:
    from tenants import selectors

    organization = selectors.organization_by_slug(slug)
    if organization is None:
        _fail(f"no organisation {slug!r} (create it with `perdura org create {slug} --owner EMAIL`)")
    return organization


def _days(text: str) -> int:
    from tenants import api_keys

    if text.isdigit():
        return int(text)
    try:
        duration = api_keys.parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if duration % timedelta(days=1):
        raise argparse.ArgumentTypeError(f"retention is whole days (e.g. 7d), not {text!r}")
    return duration // timedelta(days=1)


def _duration(text: str) -> timedelta:
    from tenants import api_keys

    try:
        return api_keys.parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _org_create(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from tenants.errors import TenantError
    from tenants.services.organizations import organization_create

    try:
        organization = organization_create(
            slug=args.name, owner_email=args.owner, name=args.display_name or ""
        )
    except TenantError as e:
        _fail(str(e))
    print(f"organisation {organization.slug} created; owner {args.owner.strip().lower()}")
    print(f"its namespaces are named <name>.{organization.slug}")


def _namespace_create(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from tenants.errors import NamespaceError
    from tenants.services.namespaces import namespace_full_name, namespace_register

    organization = _organization(args.org) if args.org else None
    name = namespace_full_name(organization=organization, name=args.name) if organization else args.name
    try:
        namespace = namespace_register(
            name=name, organization=organization, retention_days=args.retention, description=args.description
        )
    except NamespaceError as e:
        _fail(str(e))
    print(f"namespace {namespace.name} created ({namespace.id}), retention {args.retention}d")


BUCKET_HELP = [
    ("actions", "starts, signals and updates"),
    ("polls", "worker poll requests"),
    ("visibility", "list and count queries"),
]


def _rps(text: str) -> float | None:
    if text == "default":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a number of requests per second or 'default', not {text!r}"
        ) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a rate must be positive, not {text!r}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a fraction from 0 to 1, not {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a fraction from 0 (off) to 1 (full jitter), not {text!r}")
    return value


def _jitter_text(fraction: float) -> str:
    return "off" if fraction == 0 else f"up to {fraction:.0%} of each backoff"


def _namespace_update(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from tenants import quotas
    from tenants.models import Namespace
    from tenants.services.namespaces import namespace_set_rate_limits

    namespace = Namespace.objects.filter(name=args.name).first()
    if namespace is None:
        _fail(f"no namespace {args.name!r}")
    given = vars(args)  # only the flags given are set (argparse.SUPPRESS)
    if "retention" in given:
        from tenants import api_keys
        from tenants.errors import NamespaceError
        from tenants.services.namespaces import namespace_set_retention

        try:
            namespace = namespace_set_retention(namespace=namespace, retention=given["retention"])
        except NamespaceError as e:
            _fail(str(e))
        print(
            f"namespace {namespace.name}: retention {api_keys.format_duration(namespace.retention)} "
            "(for runs that close from now on)"
        )
    archival_flags = ("history_archival_state", "history_uri", "visibility_archival_state", "visibility_uri")
    if any(flag in given for flag in archival_flags):
        from tenants.errors import NamespaceError
        from tenants.services.namespaces import ArchivalRequest, namespace_set_archival

        states = {"enabled": 2, "disabled": 1}
        request = ArchivalRequest(
            history_state=states.get(given.get("history_archival_state", ""), 0),
            history_uri=given.get("history_uri", ""),
            visibility_state=states.get(given.get("visibility_archival_state", ""), 0),
            visibility_uri=given.get("visibility_uri", ""),
        )
        try:
            namespace = namespace_set_archival(namespace=namespace, request=request)
        except NamespaceError as e:
            _fail(str(e))
        for what in ("history", "visibility"):
            state = "enabled" if getattr(namespace, f"{what}_archival_state") == 2 else "disabled"
            uri = getattr(namespace, f"{what}_archival_uri") or "(no URI)"
            print(f"namespace {namespace.name}: {what} archival {state}, {uri}")
    if "codec_server_url" in given:
        from tenants.errors import NamespaceError
        from tenants.services.namespaces import namespace_update

        try:
            namespace = namespace_update(namespace=namespace, codec_server_url=given["codec_server_url"])
        except NamespaceError as e:
            _fail(str(e))
        namespace.refresh_from_db()
        print(f"namespace {namespace.name}: codec server {namespace.codec_server_url or '(none)'}")
    if "retry_jitter" in given:
        from tenants.errors import NamespaceError
        from tenants.services.namespaces import namespace_set_retry_jitter

        try:
            namespace = namespace_set_retry_jitter(namespace=namespace, fraction=given["retry_jitter"])
        except NamespaceError as e:
            _fail(str(e))
        print(f"namespace {namespace.name}: retry jitter {_jitter_text(namespace.retry_jitter)}")
    if "on_retries_exhausted" in given:
        from tenants.services.namespaces import namespace_set_on_retries_exhausted

        namespace = namespace_set_on_retries_exhausted(
            namespace=namespace, choice=given["on_retries_exhausted"]
        )
        print(
            f"namespace {namespace.name}: activities whose retries are exhausted {namespace.on_retries_exhausted}"
        )
    changes = {b.value: given[f"{b.value}_rps"] for b in quotas.LIMITED if f"{b.value}_rps" in given}
    if changes:
        try:
            namespace = namespace_set_rate_limits(namespace=namespace, changes=changes)
        except quotas.QuotaError as e:
            _fail(str(e))
    rates = quotas.namespace_rates(namespace.rate_limits)
    shown = ", ".join(
        f"{b.value} {rates.rps[b]:g}/s{'' if b in rates.overridden else ' (default)'}" for b in quotas.LIMITED
    )
    print(f"namespace {namespace.name}: rate limits {shown}")


def _apikey_create(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from tenants.errors import TenantError
    from tenants.models import Namespace
    from tenants.services.keys import apikey_create_by_operator
    from tenants.services.namespaces import namespace_full_name

    organization = _organization(args.org)
    namespaces = []
    for name in args.namespace:
        full = namespace_full_name(organization=organization, name=name)
        namespace = Namespace.objects.filter(name=full, organization=organization).first()
        if namespace is None:
            _fail(f"organisation {organization.slug!r} has no namespace {full!r}")
        namespaces.append(namespace)
    try:
        key, plaintext = apikey_create_by_operator(
            organization=organization,
            name=args.name,
            role=args.role,
            namespaces=namespaces,
            expires_in=args.expires,
            rate_limits=_key_rps_flags(args),
        )
    except TenantError as e:
        _fail(str(e))
    _print_key(key, plaintext)


def _key_rps_flags(args: argparse.Namespace) -> dict[str, float | None]:
    """The --<bucket>-rps flags given (argparse.SUPPRESS leaves the others out)."""
    from tenants import quotas

    given = vars(args)
    return {b.value: given[f"{b.value}_rps"] for b in quotas.LIMITED if f"{b.value}_rps" in given}


def _key_limits_shown(key: ApiKey) -> str:
    from tenants import quotas

    own = key.rate_limits or {}
    share = f"{quotas.key_share():g} of the namespace's"
    return ", ".join(
        f"{b.value} {own[b.value]:g}/s" if b.value in own else f"{b.value} {share}" for b in quotas.LIMITED
    )


def _apikey_update(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from tenants import api_keys
    from tenants.errors import TenantError
    from tenants.services.keys import apikey_set_rate_limits_by_operator

    key = _find_key(args.key)
    changes = _key_rps_flags(args)
    if changes:
        try:
            key = apikey_set_rate_limits_by_operator(key=key, changes=changes)
        except TenantError as e:
            _fail(str(e))
    print(f"API key {key.name!r} ({api_keys.display(key.prefix)}): rate limits {_key_limits_shown(key)}")


def _print_key(key: ApiKey, plaintext: str) -> None:
    from tenants import api_keys

    names = ", ".join(sorted(n.name for n in key.namespaces.all()))
    print(
        f"API key {key.name!r} ({api_keys.display(key.prefix)}): {key.role} on {names}, "
        f"expires {key.expires_at.isoformat(timespec='seconds')}",
        file=sys.stderr,
    )
    print("It is shown only this once; Perdura keeps only its hash:", file=sys.stderr)
    print(plaintext)


def _find_key(value: str) -> ApiKey:
    from tenants import selectors

    key = selectors.apikey_find(value)
    if key is None:
        _fail("no such API key (give the whole key, pdk_<prefix> or the prefix)")
    return key


def _apikey_revoke(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from tenants import api_keys
    from tenants.services.keys import apikey_revoke

    key = apikey_revoke(key=_find_key(args.key))
    print(f"API key {key.name!r} ({api_keys.display(key.prefix)}) revoked")


def _apikey_rotate(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from tenants.errors import TenantError
    from tenants.services.keys import apikey_rotate_by_operator

    old = _find_key(args.key)
    try:
        key, plaintext = apikey_rotate_by_operator(key=old, grace=args.grace or timedelta(0))
    except TenantError as e:
        _fail(str(e))
    _print_key(key, plaintext)


def _apikey_list(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from perdura import clock
    from tenants import api_keys, selectors

    now = clock.now()
    for key in selectors.apikey_list(organization=_organization(args.org)):
        if key.revoked_at is not None:
            status = "revoked"
        elif key.expires_at <= now:
            status = "expired"
        else:
            status = "active"
        used = key.last_used_at.isoformat(timespec="seconds") if key.last_used_at else "never"
        names = ",".join(sorted(n.name for n in key.namespaces.all()))
        own = ",".join(f"{b}={v:g}" for b, v in sorted((key.rate_limits or {}).items())) or "default"
        print(
            f"{api_keys.display(key.prefix)}  {status:8} {key.role:8} {key.name!r}  namespaces={names}  "
            f"expires={key.expires_at.isoformat(timespec='seconds')}  last_used={used}  rate_limits={own}"
        )


def _audit_export(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    import json

    from tenants import audit
    from tenants.models import Namespace

    organization = _organization(args.org) if args.org else None
    namespace_id = None
    if args.namespace:
        namespace = Namespace.objects.filter(name=args.namespace, organization=organization).first()
        if namespace is None:
            _fail(
                f"no namespace {args.namespace!r} in {'organisation ' + args.org if args.org else 'the operator namespaces'}"
            )
        namespace_id = namespace.id
    try:
        since = audit.parse_time(args.since) if args.since else None
        until = audit.parse_time(args.until) if args.until else None
    except ValueError as e:
        _fail(str(e))
    count = 0
    query = audit.events(
        organization_id=organization.id if organization else None,
        namespace_id=namespace_id,
        since=since,
        until=until,
    )
    for event in query.iterator(chunk_size=1000):
        sys.stdout.write(json.dumps(audit.as_dict(event), separators=(",", ":")) + "\n")
        count += 1
    sys.stdout.flush()
    print(f"{count} audit entries", file=sys.stderr)


def _audit_prune(args: argparse.Namespace) -> None:
    bootstrap.setup(operator=True)
    from tenants import audit

    try:
        result = audit.prune(retention_days=args.retention_days)
    except ValueError as e:
        _fail(str(e))
    if result.cutoff is None:
        print("the audit retention is 0 (keep forever): nothing pruned")
    else:
        print(
            f"{result.deleted} audit entries older than {result.cutoff.isoformat(timespec='seconds')} deleted"
        )


def _retention_days(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"a whole number of days, not {text!r}")
    return int(text)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register `org`, `namespace`, `apikey` and `audit` (export, prune) on the `perdura` command."""
    org = sub.add_parser("org", help="manage organisations")
    org_sub = org.add_subparsers(dest="org_command", required=True)
    org_create = org_sub.add_parser("create", help="create an organisation with its first owner")
    org_create.add_argument(
        "name", help="short name: lowercase letters, digits, '-'; the suffix of its namespaces"
    )
    org_create.add_argument("--owner", required=True, help="the owner's email (a user is created if new)")
    org_create.add_argument("--display-name", help="a longer name for people")
    org_create.set_defaults(func=_org_create)
    inventory_cli.add_org_parsers(org_sub)

    ns = sub.add_parser("namespace", help="manage namespaces")
    ns_sub = ns.add_subparsers(dest="ns_command", required=True)
    ns_create = ns_sub.add_parser("create", help="register a namespace (with its data key)")
    ns_create.add_argument("name", help="NAME (becomes NAME.ORG with --org)")
    ns_create.add_argument(
        "--org", help="the owning organisation; without it the namespace is the operator's"
    )
    ns_create.add_argument("--retention", type=_days, default=7, help="1d-90d (default 7d)")
    ns_create.add_argument("--retention-days", dest="retention", type=int, help=argparse.SUPPRESS)
    ns_create.add_argument("--description", default="")
    ns_create.set_defaults(func=_namespace_create)
    inventory_cli.add_namespace_parsers(ns_sub)
    ns_update = ns_sub.add_parser(
        "update",
        help="set a namespace's retention, archival, codec server URL, retry jitter or rate limits (requests per second; "
        "'default' restores the default)",
    )
    ns_update.add_argument(
        "--codec-server-url",
        default=argparse.SUPPRESS,
        metavar="URL",
        help="the codec server browsers send the console's encoded payloads to ('' for none)",
    )
    ns_update.add_argument("name", help="the full name (NAME.ORG)")
    ns_update.add_argument(
        "--retry-jitter",
        type=_fraction,
        default=argparse.SUPPRESS,
        metavar="FRACTION",
        help="default retry jitter of activities and workflow retries: each backoff is shortened by a "
        "deterministic share of up to FRACTION (0 off, 1 full jitter); a perdura-retry-jitter header overrides it",
    )
    ns_update.add_argument(
        "--on-retries-exhausted",
        choices=("fail", "park"),
        default=argparse.SUPPRESS,
        help="what an activity whose retries are exhausted does by default: fail (as Temporal) or park "
        "(paused, PerduraParked set, until a redrive); a perdura-on-retries-exhausted header overrides it",
    )
    ns_update.add_argument(
        "--retention",
        type=_duration,
        default=argparse.SUPPRESS,
        help="how long closed runs are kept, e.g. 30s, 12h, 7d "
        "(from PERDURA_RETENTION_MIN_SECONDS, default 30 s, to 90d)",
    )
    for what in ("history", "visibility"):
        ns_update.add_argument(
            f"--{what}-archival-state",
            choices=["enabled", "disabled"],
            default=argparse.SUPPRESS,
            help=f"archive closed runs' {what} (as Temporal's namespace option)",
        )
        ns_update.add_argument(
            f"--{what}-uri",
            default=argparse.SUPPRESS,
            metavar="s3://BUCKET/PREFIX",
            help=f"where {what} archives go from now on (older ones stay where they went)",
        )
    for bucket, what in BUCKET_HELP:
        ns_update.add_argument(
            f"--{bucket}-rps", type=_rps, default=argparse.SUPPRESS, metavar="N|default", help=what
        )
    ns_update.set_defaults(func=_namespace_update)
    from perdura import keys_cli

    keys_cli.add_namespace_parsers(ns_sub)

    key = sub.add_parser("apikey", help="manage API keys")
    key_sub = key.add_subparsers(dest="key_command", required=True)
    create = key_sub.add_parser("create", help="create an API key and print it (once)")
    create.add_argument("--org", required=True)
    create.add_argument("--namespace", action="append", required=True, help="repeat for several namespaces")
    create.add_argument("--role", choices=["reader", "operator", "admin"], required=True)
    create.add_argument("--name", required=True)
    create.add_argument(
        "--expires", type=_duration, default=timedelta(days=90), help="e.g. 30d (default 90d, at most 730d)"
    )
    update = key_sub.add_parser(
        "update",
        help="set a key's own rate limits in each of its namespaces (requests per second; 'default': "
        "PERDURA_KEY_RATE_SHARE of the namespace's rate); prints them",
    )
    update.add_argument("key", help="the key, pdk_<prefix> or the prefix")
    for parser in (create, update):
        for bucket, what in BUCKET_HELP:
            parser.add_argument(
                f"--{bucket}-rps",
                type=_rps,
                default=argparse.SUPPRESS,
                metavar="N|default",
                help=f"the key's own rate of {what}",
            )
    create.set_defaults(func=_apikey_create)
    update.set_defaults(func=_apikey_update)
    revoke = key_sub.add_parser("revoke", help="revoke an API key at once")
    revoke.add_argument("key", help="the key, pdk_<prefix> or the prefix")
    revoke.set_defaults(func=_apikey_revoke)
    rotate = key_sub.add_parser("rotate", help="replace a key by a new one with the same grants")
    rotate.add_argument("key", help="the key, pdk_<prefix> or the prefix")
    rotate.add_argument(
        "--grace", type=_duration, help="keep the old key working this long (default: revoke now)"
    )
    rotate.set_defaults(func=_apikey_rotate)
    listing = key_sub.add_parser("list", help="list an organisation's keys (never their secrets)")
    listing.add_argument("--org", required=True)
    listing.set_defaults(func=_apikey_list)

    log = sub.add_parser("audit", help="read (export) and prune the audit log")
    log_sub = log.add_subparsers(dest="audit_command", required=True)
    export = log_sub.add_parser("export", help="print audit entries as JSON Lines, oldest first")
    export.add_argument("--org", help="the organisation (default: the operator's own namespaces)")
    export.add_argument("--namespace", help="only this namespace (its full name)")
    export.add_argument("--since", help="RFC 3339 time or a duration back from now (e.g. 24h, 7d)")
    export.add_argument("--until", help="RFC 3339 time or a duration back from now (exclusive)")
    export.set_defaults(func=_audit_export)
    prune = log_sub.add_parser(
        "prune", help="delete audit entries older than the retention (PERDURA_AUDIT_RETENTION_DAYS)"
    )
    prune.add_argument(
        "--retention-days",
        type=_retention_days,
        help="days to keep instead of PERDURA_AUDIT_RETENTION_DAYS (at least 30; 0 keeps everything)",
    )
    prune.set_defaults(func=_audit_prune)
