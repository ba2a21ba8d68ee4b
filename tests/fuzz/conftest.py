"""Fuzz suite fixtures and knobs.

PERDURA_FUZZ_EXAMPLES: examples per gRPC method (default 10) and per REST operation and caller (default 5):
what fits the suite's ~60 s budget in `make test`;
PERDURA_FUZZ_PROFILE=long: random seeds and shrinking, for a long campaign (set EXAMPLES to hundreds);
PERDURA_FUZZ_SERVER=production: fuzz the production processes (Postgres + Celery) instead of `perdura dev`;
PERDURA_FUZZ_SECONDS: wall time after which the gRPC campaign starts no further method (default 60);
PERDURA_FUZZ_FINDINGS / PERDURA_FUZZ_REST_FINDINGS: files for the findings and the answers per method, as
JSON Lines (default: the test's tmp dir).
The summary lines (`FUZZ grpc: ...`, `FUZZ rest: ...`) are printed at the end of the run.
"""

from __future__ import annotations

import os

import pytest

from tests.fuzz import summary
from tests.support import servers


def examples(default: int) -> int:
    return int(os.environ.get("PERDURA_FUZZ_EXAMPLES", default))


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory):
    """A server of the fuzz's own, not the session's shared `dev_server`: fuzzed requests deprecate and
    delete namespaces (`default` among them) and leave odd runs behind, which other tests must not see."""
    kind = os.environ.get("PERDURA_FUZZ_SERVER", "dev")
    tmp = tmp_path_factory.mktemp(f"fuzz-{kind}")
    if kind == "production":
        with servers.postgres_database(schema=True) as url, servers.production(tmp, url) as running:
            yield running
    else:
        with servers.dev_server(tmp) as running:
            yield running


def pytest_terminal_summary(terminalreporter) -> None:
    for line in summary.LINES:
        terminalreporter.write_line(line)
