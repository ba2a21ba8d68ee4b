"""bench/retention_expiry.py end to end on a few hundred runs: the template runs through the SDK, the
clone load, the expiry beside another tenant's starts, archives read back after deletion.

The benchmark itself expires a million runs over an hour; this checks, in about a minute, that the script
still works against the current schema (a new per-run table stops its load) and that a cloned run is a
real one to retention and archival (its own database and moto server, dropped at the end)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import servers


def test_the_benchmark_expires_archives_and_reads_back_a_few_hundred_runs(tmp_path):
    out = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            "bench/retention_expiry.py",
            *("--runs", "300", "--spread", "2", "--baseline", "2", "--rate", "10"),
            *("--drain", "90", "--sample", "1", "--read-back", "5", "--control-hog", "0.2"),
            *("--json", str(out)),
        ],
        cwd=servers.ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["deleted"] == 300
    assert result["samples"][-1]["archived"] == 300
    assert result["read_back"] == {"read": 5, "complete": 5}
    assert set(result["leftovers"].values()) == {0, 300}  # the archive index alone keeps its 300
    assert result["leftovers"]["visibility_archivedvisibilityrecord (kept)"] == 300
    assert result["baseline"]["count"] > 0
    assert result["control_hog"]["count"] > 0
    assert result["control_hog"]["cores"] == 0.2
    assert result["p99_ratio_to_control"] == round(
        result["during_expiry"]["p99_ms"] / result["control_hog"]["p99_ms"], 2
    )
