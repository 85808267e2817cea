"""The example Grafana dashboard and alert rules name only metrics /metrics exports, and the
alerts the runbook promises exist."""

import json
import re
from pathlib import Path

import pytest
import yaml
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "production" / "monitoring"
METRIC_NAME = re.compile(r"\bnightshift_[a-z_]+\b")

pytestmark = pytest.mark.django_db


SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}


def exported_names(client) -> set[str]:
    """Every series name /metrics can export, whether or not it has a sample yet."""
    text = client.get(reverse("metrics")).content.decode()
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in SUFFIXES[family.type]
    }


def named_in(text: str) -> set[str]:
    return set(METRIC_NAME.findall(text))


def test_the_alert_rules_cover_sync_lag_schedd_and_submit_errors_with_real_metrics(client):
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    assert {
        "NightshiftSyncLagging",
        "NightshiftScheddUnreachable",
        "NightshiftSubmitErrors",
    } <= set(alerts)
    exported = exported_names(client)
    for name, rule in alerts.items():
        assert named_in(rule["expr"]) <= exported, name
        assert rule["annotations"]["summary"]


def test_every_dashboard_query_names_an_exported_metric(client):
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exported = exported_names(client)
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(queries) >= 10
    for query in queries:
        assert named_in(query), query
        assert named_in(query) <= exported, query
