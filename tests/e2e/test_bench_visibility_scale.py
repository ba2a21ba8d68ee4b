"""bench/visibility_scale.py end to end on a tiny dataset: load, `perdura api`, every query answers.

The benchmark itself loads a million runs; this only checks, in seconds, that the script still works
against the current schema and API (its own database, dropped at the end).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

from tests.support import servers


def test_the_benchmark_loads_and_measures_a_tiny_dataset(tmp_path):
    out = tmp_path / "results.json"
    database = f"perdura_test_visbench_{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [
            sys.executable,
            "bench/visibility_scale.py",
            *("--admin-url", servers.postgres_admin_url(), "--db", database),
            *("--runs", "3000", "--noise", "300", "--repetitions", "2", "--warmup", "0"),
            *("--drop", "--json", str(out)),
        ],
        cwd=servers.ROOT,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    results = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert results["count GROUP BY status"]["rows"] == 3000  # the other namespace's runs are not seen
    assert results["all, page 6"]["rows"] == 100
    assert results["customer"]["rows"] > 0
    assert all(r["p99"] > 0 for r in results.values())
