"""An incident's alert carries what its detection found beyond its class (a co-tenant's GPU, processes, slowdown)."""

from __future__ import annotations

from twinloop.ops.alerts import incident_alert
from twinloop.ops.detect.co_tenant import SOURCE
from twinloop.ops.events import Detection, EventClass, Incident, Severity

GPU = "dc/r1/k1/n1/gpu0"


def _incident(*details: str) -> Incident:
    evidence = tuple(Detection(1.0, GPU, SOURCE, 9.0, "anomaly", EventClass.STRAGGLER, "k", d) for d in details)
    return Incident(3, EventClass.STRAGGLER, GPU, (GPU,), 1.0, 2.0, Severity.MINOR, evidence=evidence)


def test_a_co_tenant_alert_names_its_processes() -> None:
    why = f"co-tenant on {GPU}: 2 compute processes for the job's 1 rank there: pid 4242 (jupyter-kernel, 8192 MiB)"
    alert = incident_alert(_incident(why, why))
    assert alert["annotations"]["description"] == why


def test_an_alert_without_details_is_as_before() -> None:
    assert "description" not in incident_alert(_incident(""))["annotations"]
