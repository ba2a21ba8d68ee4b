"""infra/grafana/perdura.json is a dashboard Grafana's own types read back unchanged, whose every query parses
as PromQL and names only series Perdura exports; and the manifests let Prometheus find the metrics ports.

What is checked, and what is not: Grafana publishes no JSON schema of dashboards on PyPI. The round trip
through grafana-foundation-sdk (Grafana's generated types) drops any field those types do not know, so a
misspelt or invented field of the dashboard, a panel or a variable fails here. Not checked: the query
objects' own fields (the SDK keeps unknown ones), value types, and plugin options beyond the SDK's models;
no Grafana server loads the file in this test. The queries are checked apart, by a PromQL parser."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import promql_parser
import pytest
import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as grafana
from perdura import metrics
from prometheus_client.metrics import MetricWrapperBase

from engine.shards import scrape

INFRA = Path(__file__).resolve().parents[2] / "infra"
DASHBOARD = INFRA / "grafana" / "perdura.json"
TEMPLATE_VALUES = {"$__rate_interval": "5m", "$namespace": ".*"}
"""Grafana's variables, as Grafana substitutes them before sending a query."""


def load() -> dict:
    return json.loads(DASHBOARD.read_text())


def exported_series() -> set[str]:
    """Every series name Perdura's processes expose: counters with _total, histograms' three, gauges as is."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    names = set(scrape.GAUGES)
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            for family in value.describe():
                names.update(family.name + suffix for suffix in suffixes[family.type])
    return names


def queries(dashboard: dict) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def selectors(expr: str) -> list[str]:
    for variable, value in TEMPLATE_VALUES.items():
        expr = expr.replace(variable, value)
    names: list[str] = []

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            names.append(node.name)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def round_trip(dashboard: dict) -> dict:
    return json.loads(json.dumps(grafana.Dashboard.from_json(dashboard), cls=JSONEncoder))


def lost(original: object, read: object, path: str = "") -> list[str]:
    """Where `read` (the round trip) lacks or changed what `original` says; defaults it adds are fine."""
    if isinstance(original, dict) and isinstance(read, dict):
        return [
            found
            for key, value in original.items()
            for found in ([f"{path}/{key}"] if key not in read else lost(value, read[key], f"{path}/{key}"))
        ]
    if isinstance(original, list) and isinstance(read, list) and len(original) == len(read):
        return [
            found
            for i, (a, b) in enumerate(zip(original, read, strict=True))
            for found in lost(a, b, f"{path}[{i}]")
        ]
    return [] if original == read else [path]


def test_grafanas_types_read_the_dashboard_back_unchanged():
    assert lost(load(), round_trip(load())) == []


def test_a_field_grafana_does_not_know_is_caught():
    broken = copy.deepcopy(load())
    broken["panels"][1]["titel"] = broken["panels"][1].pop("title")
    broken["templating"]["list"][1]["inlcudeAll"] = broken["templating"]["list"][1].pop("includeAll")
    assert lost(broken, round_trip(broken)) == ["/templating/list[1]/inlcudeAll", "/panels[1]/titel"]


def test_panels_have_unique_ids_and_fit_the_grid():
    panels = load()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_every_query_parses_and_names_exported_series():
    exported = exported_series()
    assert "perdura_grpc_request_duration_seconds_bucket" in exported
    assert "perdura_parked_rows" in exported
    for expr in queries(load()):
        names = selectors(expr)
        assert names, expr
        assert set(names) <= exported, (expr, set(names) - exported)


def test_a_query_naming_a_series_nobody_exports_is_caught():
    assert not set(selectors("sum(rate(perdura_grpc_request_total[$__rate_interval]))")) <= exported_series()
    with pytest.raises(ValueError, match="parenthesis"):
        selectors("sum(rate(perdura_grpc_requests_total[5m])")


def test_the_dashboard_charts_what_an_operator_pages_on():
    used = {name for expr in queries(load()) for name in selectors(expr)}
    for series in (
        "perdura_grpc_requests_total",
        "perdura_grpc_errors_total",
        "perdura_grpc_request_duration_seconds_bucket",
        "perdura_task_queue_backlog_tasks",
        "perdura_timer_lateness_seconds_bucket",
        "perdura_parked_rows",
        "perdura_rate_limit_refusals_total",
    ):
        assert series in used, series
    p99 = [e for e in queries(load()) if "perdura_grpc_request_duration_seconds_bucket" in e]
    assert any(re.match(r"histogram_quantile\(0\.99,", e) for e in p99)


@pytest.mark.parametrize("component", ["api", "worker"])
def test_manifests_expose_the_metrics_port_to_prometheus(component):
    (deployment,) = [
        doc
        for doc in yaml.safe_load_all((INFRA / "kubernetes" / f"{component}.yaml").read_text())
        if doc and doc["kind"] == "Deployment"
    ]
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    args = container["args"]
    port = int(args[args.index("--metrics-port") + 1])
    assert {"name": "metrics", "containerPort": port} in container["ports"]
    annotations = template["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics",
    }
