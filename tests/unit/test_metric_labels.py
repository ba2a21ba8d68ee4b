"""Namespace labels of the metrics stay bounded: switched off they are all "", and one process labels at most
its limit of namespaces, the rest as one "_other" value."""

from __future__ import annotations

import pytest
from perdura import metrics


def test_namespaces_past_the_limit_share_one_label():
    labels = metrics.NamespaceLabels(enabled=True, limit=2)
    assert [labels(n) for n in ("a", "b", "c", "a", "d", "b")] == ["a", "b", "_other", "a", "_other", "b"]


def test_switched_off_every_namespace_is_unlabelled():
    labels = metrics.NamespaceLabels(enabled=False)
    assert {labels(n) for n in ("default", "payments.acme")} == {""}


@pytest.mark.parametrize(("value", "enabled"), [("", True), ("1", True), ("0", False), ("off", False)])
def test_the_setting_is_read_at_first_use(monkeypatch, value, enabled):
    monkeypatch.setenv("PERDURA_METRICS_NAMESPACE_LABELS", value or "1")
    labels = metrics.NamespaceLabels()
    assert labels("default") == ("default" if enabled else "")


def test_a_bad_setting_is_refused_with_its_name(monkeypatch):
    monkeypatch.setenv("PERDURA_METRICS_NAMESPACE_LABELS", "maybe")
    with pytest.raises(SystemExit, match="PERDURA_METRICS_NAMESPACE_LABELS must be 1 or 0"):
        metrics.NamespaceLabels()("default")
