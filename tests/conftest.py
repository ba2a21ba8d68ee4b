"""Shared fixtures: running Perdura servers (dev on SQLite, production on Postgres) and SDK clients."""

from __future__ import annotations

import pytest
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from tests.support import s3, servers

# The suite's SDK workers run workflow code unsandboxed unless a test asks otherwise. The sandbox is the
# SDK's check of the workflow code's own determinism, inside the worker: the server never sees it, and it
# was most of the test processes' CPU (two e2e files: 53 s of user time with it, 21 s without). The
# conformance run (../shared/conformance: the SDK's own tests) keeps the SDK's defaults.
# An SDK that moved the keyword fails here, rather than leaving the suite silently slow again.
if "workflow_runner" not in (Worker.__init__.__kwdefaults__ or {}):
    raise RuntimeError("temporalio.worker.Worker has no workflow_runner keyword default to set")
Worker.__init__.__kwdefaults__["workflow_runner"] = UnsandboxedWorkflowRunner()

SERVER_ENV = {"PERDURA_RETENTION_MIN_SECONDS": "1"}
"""The operator's retention floor lowered, so a retention test waits seconds (tests/e2e/test_retention.py)."""

SERIAL = (
    "tests/chaos/",  # kills and restarts processes, and measures what a restart delays
    "tests/e2e/test_poison_rows.py",  # measures other tenants' timer lateness beside a poison row
    "tests/e2e/test_timer_wakeups.py",  # measures timer lateness
    "tests/fuzz/test_grpc_fuzz.py",  # measures a canary's timer lateness beside the fuzzing
    # measures how fast a routed task reaches its version's poller
    "tests/e2e/test_deployment_routing.py::test_a_run_routed_to_one_version_reaches_its_waiting_poller_at_once",
    # measure the console's live latency (signal RPC return to the event in the page)
    "tests/browser/test_console_live.py::test_run_history_grows_live_as_signals_arrive",
    "tests/browser/test_console_auth.py::test_live_updates_travel_from_api_to_web_through_redis",
)
"""Tests that measure time or stop processes: `make test` runs them after the others, two files at a time
(a core each on the 2-core machine), so that the rest of the suite's CPU does not count as their lateness
(the others run three files at a time, pytest-xdist)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(part in item.nodeid for part in SERIAL):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory):
    with servers.dev_server(tmp_path_factory.mktemp("dev"), env=SERVER_ENV) as running:
        yield running


@pytest.fixture(scope="session")
def production_server(tmp_path_factory: pytest.TempPathFactory):
    with (
        servers.postgres_database(schema=True) as url,
        servers.production(tmp_path_factory.mktemp("prod"), url, env=SERVER_ENV) as running,
    ):
        yield running


@pytest.fixture(params=["dev", "postgres"], scope="session")
def server(request: pytest.FixtureRequest):
    """Each e2e test runs against `perdura dev` (SQLite) and the production processes (Postgres + Celery)."""
    name = "dev_server" if request.param == "dev" else "production_server"
    return request.getfixturevalue(name)


@pytest.fixture
async def client(server):
    from temporalio.client import Client

    return await Client.connect(server.address, namespace="default")


_rgw_started_in: list[float] = []


@pytest.fixture(scope="session")
def radosgw():
    """The session's one radosgw (PERDURA_TEST_S3=radosgw, tests/support/s3.py): started when an archival
    test first asks for its store, stopped at the session's end."""
    with s3.radosgw_s3() as running:
        _rgw_started_in.append(running.started_in)
        yield running


def pytest_configure(config: pytest.Config) -> None:
    try:
        s3.tier()
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_report_header() -> str:
    return f"S3 tier: {s3.tier()} ({s3.TIER_VARIABLE})"


def pytest_terminal_summary(terminalreporter) -> None:
    for seconds in _rgw_started_in:
        terminalreporter.write_line(f"radosgw (single-node Ceph, memstore) started in {seconds:.1f} s")
