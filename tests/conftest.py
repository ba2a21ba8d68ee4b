"""Shared fixtures: running Perdura servers (dev on SQLite, production on Postgres) and SDK clients."""

from __future__ import annotations

import pytest

from tests.support import servers


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory):
    with servers.dev_server(tmp_path_factory.mktemp("dev")) as running:
        yield running


@pytest.fixture(scope="session")
def production_server(tmp_path_factory: pytest.TempPathFactory):
    with (
        servers.postgres_database() as url,
        servers.production(tmp_path_factory.mktemp("prod"), url) as running,
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
