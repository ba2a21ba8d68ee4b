"""What a person pastes to connect the Python SDK and the `temporal` CLI to a namespace with a key.

The snippets name the gRPC address clients dial (`PERDURA_API_ADDRESS`) and say TLS as that address
speaks it (`PERDURA_API_TLS`): the SDK and the CLI turn TLS on when given a key, so a plaintext
listener needs `tls=False` / `--tls=false`. The Python one is a whole program: a workflow, a worker
and one run of it, so pasting it into a file and running it proves the key, the namespace and the
address at once.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True, slots=True)
class Snippets:
    """The two snippets for one namespace and key."""

    python: str
    cli: str


_PYTHON = """# pip install temporalio
import asyncio
import uuid

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker


# In a project, workflows live in a module of their own and run in the SDK's sandbox; one defined in
# the script it runs from cannot be re-imported there, so this one runs outside it.
@workflow.defn(sandboxed=False)
class Hello:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"Hello, {{name}}!"


async def main() -> None:
    client = await Client.connect(
        {address},
        namespace={namespace},
        api_key={key},{tls}
    )
    async with Worker(client, task_queue="hello", workflows=[Hello]):
        result = await client.execute_workflow(
            Hello.run, "Perdura", id=f"hello-{{uuid.uuid4()}}", task_queue="hello"
        )
    print(result)


if __name__ == "__main__":
    asyncio.run(main())
"""


def _py(text: str) -> str:
    """A Python string literal of `text` (double-quoted, escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def snippets_for(*, namespace: str, key: str) -> Snippets:
    """The snippets connecting to `namespace` with `key` (the plaintext key, shown once)."""
    address = settings.PERDURA_API_ADDRESS
    tls = "" if settings.PERDURA_API_TLS else "\n        tls=False,"
    python = _PYTHON.format(address=_py(address), namespace=_py(namespace), key=_py(key), tls=tls)
    cli = " ".join(
        [
            "temporal workflow list",
            f"--address {shlex.quote(address)}",
            f"--namespace {shlex.quote(namespace)}",
            f"--api-key {shlex.quote(key)}",
            *([] if settings.PERDURA_API_TLS else ["--tls=false"]),
        ]
    )
    return Snippets(python=python, cli=cli)
