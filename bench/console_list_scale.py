"""The console's workflows list over a million runs: server time of the list page, p50/p99 over N renders.

Issue 12's figure: the list page of a namespace with 1,000,000 runs renders in under 300 ms. The data is
bench/visibility_scale.py's (run its load step first: `python bench/visibility_scale.py --load-only`),
1,000,000 runs in `default` and 100,000 in a second namespace, on Postgres. This script makes the
production web process serve it: a person who owns `default` through an organisation of their own
(created in the benchmark database, and `default` moved into it), signed in with a session made for
them, and `perdura web` (uvicorn, one worker) on that database. Each page is fetched `--renders` times
over loopback HTTP after `--warmup` fetches; the page reports its own time in
`Server-Timing: app;dur=<ms>, cpu;dur=<ms>` (frontend/middleware.py), printed beside the round trip.

The pages: the list as it opens (newest first, status chips with counts), filtered by status, by a
custom attribute, by type over the last seven days, and the list's second page (the first's `next` link).

    python bench/console_list_scale.py [--db perdura_bench_visibility] [--renders 30] [--json out.json]
    python bench/console_list_scale.py --web http://127.0.0.1:8233 --cookie 'sessionid=...' [--namespace N]
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from visibility_scale import _env, perdura_process  # noqa: E402

APP = re.compile(r"app;dur=([0-9.]+)")
CPU = re.compile(r"cpu;dur=([0-9.]+)")
NEXT = re.compile(r'href="([^"]*next=[^"]+)"')
BENCH_EMAIL = "console-bench@example.com"
BENCH_ORG = "console-bench"

SIGN_IN = """
from django.contrib.auth import get_user_model
from django.test import Client
from tenants.models import Namespace, Organization
from tenants.services import organizations
org = Organization.objects.filter(slug={org!r}).first()
if org is None:
    org = organizations.organization_create(slug={org!r}, owner_email={email!r})
Namespace.objects.filter(name={namespace!r}).update(organization=org)
user = get_user_model().objects.get(email={email!r})
client = Client()
client.force_login(user)
print("sessionid=" + client.cookies["sessionid"].value)
"""


def pages() -> list[tuple[str, dict[str, str]]]:
    return [
        ("the list as it opens", {}),
        ("ExecutionStatus = 'Running'", {"query": "ExecutionStatus = 'Running'"}),
        ("a customer's runs (CustomerId = 'c-42', about 0.23 %)", {"query": "CustomerId = 'c-42'"}),
        ("one type, last 7 days", {"query": "WorkflowType = 'Refund'", "range": "7d"}),
    ]


def fetch(url: str, cookie: str) -> tuple[float, float, float, str]:
    """(server ms, server CPU ms, round trip ms, body) of one GET."""
    request = urllib.request.Request(
        url, headers={"Cookie": cookie, "Host": urllib.parse.urlsplit(url).netloc}
    )
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        body = response.read().decode()
        timing = response.headers.get("Server-Timing", "")
    wall = (time.perf_counter() - began) * 1000
    app, cpu = APP.search(timing), CPU.search(timing)
    if app is None:
        raise RuntimeError(f"{url} answered without Server-Timing (signed in? {response.status})")
    return float(app.group(1)), float(cpu.group(1)) if cpu else float("nan"), wall, body


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def measure(web: str, cookie: str, namespace: str, renders: int, warmup: int) -> list[dict[str, object]]:
    base = f"{web}/namespaces/{urllib.parse.quote(namespace)}/workflows"
    targets = [
        (label, f"{base}?{urllib.parse.urlencode(params)}" if params else base) for label, params in pages()
    ]
    _, _, _, first = fetch(base, cookie)
    rows = first.count('class="wid"')
    link = NEXT.search(first)
    if link is None:
        Path("/tmp/console_list_first_page.html").write_text(first)
        raise RuntimeError(
            "the list's first page has no next link (saved in /tmp/console_list_first_page.html): is it loaded?"
        )
    targets.append(
        ("the second page (its next link)", urllib.parse.urljoin(base, html.unescape(link.group(1))))
    )
    results = []
    for label, url in targets:
        for _ in range(warmup):
            fetch(url, cookie)
        app, cpu, wall = [], [], []
        for _ in range(renders):
            a, c, w, _body = fetch(url, cookie)
            app.append(a)
            cpu.append(c)
            wall.append(w)
        result = {
            "page": label,
            "server_p50_ms": round(statistics.median(app), 1),
            "server_p99_ms": round(_percentile(app, 0.99), 1),
            "cpu_p50_ms": round(statistics.median(cpu), 1),
            "round_trip_p50_ms": round(statistics.median(wall), 1),
        }
        results.append(result)
        print(json.dumps(result), flush=True)
    print(json.dumps({"rows_on_first_page": rows}), flush=True)
    return results


@contextlib.contextmanager
def perdura_web(env: dict[str, str]) -> Iterator[str]:
    """`perdura web` (one uvicorn worker) on the benchmark database: its base URL."""
    with perdura_process(env, "web", "--workers", "1") as port:
        yield f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--web", help="measure this console instead of starting one on the benchmark database"
    )
    parser.add_argument("--cookie", help="with --web: the signed-in session's Cookie header")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument(
        "--db", default="perdura_bench_visibility", help="bench/visibility_scale.py's database"
    )
    parser.add_argument("--renders", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.web:
        results = measure(args.web, args.cookie or "", args.namespace, args.renders, args.warmup)
    else:
        base, _, _ = args.admin_url.rpartition("/")
        with tempfile.TemporaryDirectory(prefix="perdura-bench-") as tmp:
            env = _env(f"{base}/{args.db}", tmp)
            env["PERDURA_SECRET_KEY"] = "console-list-bench-" + "x" * 40
            code = SIGN_IN.format(org=BENCH_ORG, email=BENCH_EMAIL, namespace=args.namespace)
            done = subprocess.run(
                [sys.executable, "manage.py", "shell", "-c", code],
                env=env,
                capture_output=True,
                text=True,
                cwd=ROOT,
            )
            if done.returncode != 0:
                raise RuntimeError(f"signing in failed:\n{done.stderr[-4000:]}")
            cookie = done.stdout.strip().splitlines()[-1]
            with perdura_web(env) as web:
                results = measure(web, cookie, args.namespace, args.renders, args.warmup)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
    os._exit(0)  # see README "Process exit"
