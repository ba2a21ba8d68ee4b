"""The metrics port: a taken port is left alone (so a second process of a role never empties the first's
directory), a bound one serves /metrics and /healthz over real HTTP, and anything else is 404."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

from perdura import metrics, metrics_server
from prometheus_client.parser import text_string_to_metric_families


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_a_taken_port_is_not_bound():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert metrics_server.bind("127.0.0.1", taken.getsockname()[1]) is None
    assert metrics_server.bind("127.0.0.1", 0) is None  # 0: metrics off


def test_a_bound_port_serves_the_series_and_liveness():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = metrics_server.start(metrics_server.bind("127.0.0.1", port))
    assert server is not None
    try:
        metrics.rate_limit_refusals.labels("unit-port-ns", "polls").inc(3)
        status, text = get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
        # Other tests of this process may count refusals of their own namespaces.
        refused = [
            s
            for s in samples
            if s.name == "perdura_rate_limit_refusals_total" and s.labels["namespace"] == "unit-port-ns"
        ]
        assert [(s.labels["bucket"], s.value) for s in refused] == [("polls", 3.0)]
        assert get(f"http://127.0.0.1:{port}/healthz") == (200, '{"status": "ok"}')
        assert get(f"http://127.0.0.1:{port}/other")[0] == 404
    finally:
        server.shutdown()
        server.server_close()
