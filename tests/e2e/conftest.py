"""E2E fixtures: an SDK worker on a fresh task queue, serving the workflows of tests/e2e/workflows.py."""

from __future__ import annotations

import uuid

import pytest
from temporalio.worker import Worker

from tests.e2e.workflows import ALL_ACTIVITIES, ALL_WORKFLOWS


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4()}"


@pytest.fixture
async def worker(client, task_queue):
    async with Worker(
        client, task_queue=task_queue, workflows=ALL_WORKFLOWS, activities=ALL_ACTIVITIES
    ) as running:
        yield running


def new_id(prefix: str = "wf") -> str:
    return f"{prefix}-{uuid.uuid4()}"


async def event_types(handle) -> list[str]:
    from temporalio.api.enums.v1 import EventType

    return [
        EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") async for e in handle.fetch_history_events()
    ]


async def events(handle) -> list:
    return [e async for e in handle.fetch_history_events()]
