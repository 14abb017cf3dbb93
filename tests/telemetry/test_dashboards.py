"""The Grafana dashboards under dashboards/: every PromQL expression runs on a real Prometheus scraping the twin.

The stock DCGM exporter dashboard (grafana.com 12239, unchanged) and twinloop's facility dashboard are read as
Grafana would: template variables are resolved first (``label_values(...)`` through the Prometheus API, then
substituted as a multi-value regex ``(a|b)``, as Grafana does for "All"), then every panel target is run as a
range query. Each must parse and return data. Prometheus is the Debian package; the test skips (with the
reason) when it is absent, and every wait is bounded.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from tests import servers

from twinloop.telemetry.exporter import Exporter
from twinloop.telemetry.fields import FIELD_BY_NAME
from twinloop.telemetry.sources.twin import TwinConfig, TwinSource

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
#: The stock DCGM dashboard's queries (grafana.com 12239), kept as a fixture: users import the dashboard itself.
STOCK = Path(__file__).resolve().parents[1] / "fixtures" / "grafana" / "dcgm-12239-queries.json"
FILES = ("dcgm-12239-queries.json", "twinloop-facility.json")
#: Grafana's built-in interval variables, as Grafana would set them for a 1 s scrape interval.
BUILTINS = {"$__rate_interval": "5s", "$__interval": "1s", "$__range": "1m"}
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$")


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((STOCK if name == STOCK.name else DASHBOARDS / name).read_text())
    return doc


def _panels(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in doc.get("panels", []):
        yield p
        yield from p.get("panels", [])  # panels inside collapsed rows


def _targets(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) of every PromQL target."""
    return [(p.get("title", ""), t["expr"]) for p in _panels(doc) for t in p.get("targets", []) if t.get("expr")]


def _variables(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, label_values query) of every query variable, in dashboard order."""
    out = []
    for v in doc.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out.append((v["name"], q))
    return out


def _substitute(expr: str, values: dict[str, list[str]]) -> str:
    for name, val in BUILTINS.items():
        expr = expr.replace(name, val)
    for name in sorted(values, key=len, reverse=True):
        regex = "(" + "|".join(re.escape(v).replace("\\", "\\\\") for v in values[name]) + ")"
        expr = expr.replace("${" + name + "}", regex).replace("$" + name, regex)
    return expr


def test_dashboards_are_grafana_json_on_the_datasource_variable() -> None:
    for name in FILES:
        doc = _load(name)
        assert doc["schemaVersion"] >= 30 and doc["title"]
        assert any(v["type"] == "datasource" and v["name"] == "datasource" for v in doc["templating"]["list"])
        targets = _targets(doc)
        assert len(targets) >= 8, name
        for p in _panels(doc):
            if p.get("type") != "row":
                assert p["datasource"]["uid"] == "$datasource", (name, p.get("title"))
        # Every metric a panel reads is a field twinloop knows (a typo would otherwise show an empty panel).
        exprs = [e for _, e in targets] + [q for _, q in _variables(doc)]
        metrics = {m for e in exprs for m in re.findall(r"\b(?:DCGM|TWINLOOP)_FI_[A-Z0-9_]+", e)}
        assert metrics and metrics <= set(FIELD_BY_NAME), metrics - set(FIELD_BY_NAME)
    assert _load(STOCK.name)["gnetId"] == 12239


def test_provisioning_files_point_at_prometheus_and_the_dashboards() -> None:
    ds = yaml.safe_load((DASHBOARDS / "provisioning/datasources/twinloop-prometheus.yaml").read_text())
    assert ds["apiVersion"] == 1 and ds["datasources"][0]["type"] == "prometheus"
    prov = yaml.safe_load((DASHBOARDS / "provisioning/dashboards/twinloop.yaml").read_text())
    assert prov["providers"][0]["type"] == "file" and prov["providers"][0]["options"]["path"]


@pytest.fixture(scope="module")
def prometheus_on_twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    servers.require(servers.PROMETHEUS, "prometheus")  # before the twin runs
    with Exporter(listen="127.0.0.1:0") as exporter:
        feeder = exporter.feed(TwinSource(TwinConfig(steps=60)))
        feeder.join(120)
        assert not feeder.is_alive() and exporter.feed_error is None, exporter.feed_error
        target = f"127.0.0.1:{exporter.port}"
        with servers.prometheus(tmp_path_factory.mktemp("prom"), [target]) as server:
            # At least 4 scrapes of the exporter, so rate() over 5 s has data.
            scrapes = "min(count_over_time(TWINLOOP_FI_PUE[1m]))"
            server.wait_until(lambda: float(server.query(scrapes)[0]["value"][1]) >= 4, "4 scrapes", 60)
            yield server.url


def _query(url: str, expr: str, instant: bool = False) -> list[dict[str, Any]]:
    now = time.time()
    if instant:
        resp = httpx.get(f"{url}/api/v1/query", params={"query": expr, "time": now}, timeout=10)
    else:
        params = {"query": expr, "start": now - 20, "end": now, "step": 1}
        resp = httpx.get(f"{url}/api/v1/query_range", params=params, timeout=10)
    body = resp.json()
    assert body.get("status") == "success", f"{expr}: {body.get('errorType')}: {body.get('error')}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _resolve_variables(url: str, doc: dict[str, Any]) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for name, query in _variables(doc):
        m = _LABEL_VALUES.match(query.strip())
        assert m is not None, f"variable {name}: only label_values(...) queries are supported, got {query!r}"
        selector, label = _substitute(m.group(1), values), m.group(2)
        found = sorted({s["metric"].get(label, "") for s in _query(url, f"group by ({label}) ({selector})", True)})
        assert found and found != [""], f"variable {name}: {query} gave no values"
        values[name] = found
    return values


@pytest.mark.integration
@pytest.mark.parametrize("name", FILES)
def test_every_dashboard_query_returns_data(prometheus_on_twin: str, name: str) -> None:
    doc = _load(name)
    values = _resolve_variables(prometheus_on_twin, doc)
    empty = []
    for title, expr in _targets(doc):
        query = _substitute(expr, values)
        if not any(s.get("values") for s in _query(prometheus_on_twin, query)):
            empty.append(f"{title}: {query}")
    assert not empty, "queries without data:\n" + "\n".join(empty)


@pytest.mark.integration
def test_dcgm_dashboard_sees_one_hostname_per_node_and_job_labels(prometheus_on_twin: str) -> None:
    series = _query(prometheus_on_twin, "DCGM_FI_DEV_FB_FREE", True)
    nodes = {s["metric"]["entity"].rsplit("/", 1)[0] for s in series}
    hosts = {s["metric"]["Hostname"] for s in series}
    assert len(hosts) == len(nodes) > 1  # Hostname is unique per node (the twin numbers nodes per rack)
    uuids = {s["metric"]["UUID"] for s in series}
    assert len(uuids) == len(series)
    for label in ("gpu", "device", "modelName", "pci_bus_id"):
        assert all(s["metric"].get(label) for s in series), label
    busy = [s for s in series if "pod" in s["metric"]]
    assert busy and all(s["metric"]["namespace"] and s["metric"]["container"] for s in busy)
