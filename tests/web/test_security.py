"""Auth on every endpoint, approvals through the API, input validation and the data-directory fence."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from twinloop.errors import InputError
from twinloop.web import create_app
from twinloop.web.models import RunStart

from .conftest import AUTH, TOKEN, Loop

READS = [
    "/api/overview",
    "/api/status",
    "/api/floor",
    "/api/rack?id=dc9/r02/k03",
    "/api/gpu?id=dc9/r02/k03/n01/g0",
    "/api/series?entity=dc9&field=TWINLOOP_FI_PUE",
    "/api/jobs",
    "/api/job?id=dc9/jobs/train-a",
    "/api/incidents",
    "/api/actions",
    "/api/actions/pending",
    "/api/plan/options",
    "/api/reports",
]
WRITES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("post", "/api/actions/0/approve", None),
    ("post", "/api/actions/0/reject", None),
    ("put", "/api/policy/mode", {"mode": "auto"}),
    ("post", "/api/runs", {"duration_s": 60}),
]


@pytest.mark.parametrize("path", READS)
def test_reads_need_the_token_unless_open(app, site_db: Path, loop: Loop, path: str) -> None:  # type: ignore[no-untyped-def]
    c = TestClient(app)
    assert c.get(path).status_code == 401
    assert c.get(path).headers["www-authenticate"] == "Bearer"
    assert c.get(path, headers={"Authorization": "Bearer wrong-token-0000000000"}).status_code == 403
    assert c.get(path, headers=AUTH).status_code == 200
    opened = TestClient(create_app(site_db, site_db.parent, TOKEN, open_read=True, controller=loop.controller))
    assert opened.get(path).status_code == 200


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_writes_need_the_token_even_with_open_reads(
    site_db: Path, loop: Loop, method: str, path: str, body: dict[str, Any] | None
) -> None:
    c = TestClient(create_app(site_db, site_db.parent, TOKEN, open_read=True, controller=loop.controller))
    assert c.request(method, path, json=body).status_code == 401
    assert c.request(method, path, json=body, headers={"Authorization": "Bearer nope"}).status_code == 403
    assert loop.adapter.applied == [] and len(loop.responder.pending) == 2


def test_approve_and_reject_through_the_api(app, loop: Loop) -> None:  # type: ignore[no-untyped-def]
    c = TestClient(app)
    pending = c.get("/api/actions/pending", headers=AUTH).json()
    ids = [a["action_id"] for a in pending]
    assert len(ids) == 2 and {a["kind"] for a in pending} == {"cdu_flow", "cdu_setpoint"}
    r = c.post(f"/api/actions/{ids[0]}/approve", headers=AUTH)
    assert r.status_code == 200 and r.json()["status"] == "applied"
    assert [a.kind for a in loop.adapter.applied] == [pending[0]["kind"]]
    assert c.post(f"/api/actions/{ids[0]}/approve", headers=AUTH).status_code == 404  # no longer pending
    r = c.post(f"/api/actions/{ids[1]}/reject", headers=AUTH)
    assert r.json()["status"] == "rejected" and len(loop.adapter.applied) == 1
    assert c.get("/api/actions/pending", headers=AUTH).json() == []
    assert c.post("/api/actions/-1/approve", headers=AUTH).status_code == 422


def test_mode_change_and_conflicts_without_a_loop(app, site_db: Path, loop: Loop) -> None:  # type: ignore[no-untyped-def]
    c = TestClient(app)
    r = c.put("/api/policy/mode", json={"mode": "observe"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["controller"]["mode"] == "observe" and loop.responder.mode == "observe"
    assert c.put("/api/policy/mode", json={"mode": "yolo"}, headers=AUTH).status_code == 422
    bare = TestClient(create_app(site_db, site_db.parent, TOKEN))
    assert bare.post("/api/actions/0/approve", headers=AUTH).status_code == 409
    assert bare.put("/api/policy/mode", json={"mode": "auto"}, headers=AUTH).status_code == 409
    assert bare.post("/api/runs", json={}, headers=AUTH).status_code == 409


def test_start_run_calls_the_factory_with_validated_input(site_db: Path) -> None:
    seen: list[RunStart] = []

    def factory(req: RunStart) -> dict[str, Any]:
        seen.append(req)
        return {"run": "r1", "duration_s": req.duration_s, "nested": {"dropped": True}}

    c = TestClient(create_app(site_db, site_db.parent, TOKEN, run_factory=factory))
    r = c.post("/api/runs", json={"duration_s": 120, "mode": "auto", "seed": 3}, headers=AUTH)
    assert r.status_code == 200 and r.json() == {"started": True, "detail": {"run": "r1", "duration_s": 120.0}}
    assert seen == [RunStart(duration_s=120, mode="auto", seed=3)]
    for bad in ({"duration_s": -1}, {"duration_s": 1e12}, {"mode": "x"}, {"path": "/etc/passwd"}):
        assert c.post("/api/runs", json=bad, headers=AUTH).status_code == 422
    assert len(seen) == 1


@pytest.mark.parametrize(
    "query",
    [
        "id=../../etc/passwd",
        "id=/etc/passwd",
        "id=dc9/../../x",
        "id=" + "a/" * 10 + "a",
        "id=dc9%00/r01",
        "id=dc9/r01/k01&since_s=5&until_s=1",
        "id=dc9/r01/k01&points=100000",
        "id=dc9/r01/k01&since_s=1e300",
        "id=dc9/r01/k01&=null",  # an undeclared (here: empty) parameter name
        "id=dc9/r01/k01&color=red",
    ],
)
def test_bad_query_parameters_are_rejected(app, query: str) -> None:  # type: ignore[no-untyped-def]
    assert TestClient(app).get("/api/rack?" + query, headers=AUTH).status_code == 422


def test_reports_are_fenced_inside_the_data_dir(tmp_path: Path, site_db: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "report.html").write_text("<html>ok</html>")
    (tmp_path / "secret.html").write_text("secret")
    os.symlink(tmp_path / "secret.html", data / "link.html")
    c = TestClient(create_app(site_db, data, TOKEN, open_read=True))
    assert [f["name"] for f in c.get("/api/reports").json()] == ["report.html"]
    assert c.get("/reports/report.html").text == "<html>ok</html>"
    for name in (
        "link.html",
        "..%2Fsecret.html",
        "%2e%2e%2fsecret.html",
        "telemetry.duckdb",
        "report.html%00.html",
        "sub%2Freport.html",
        "%2E%2E",
    ):
        r = c.get("/reports/" + name)
        assert r.status_code == 404 and "secret" not in r.text, name
    for raw in ("/reports/../secret.html", "/reports/.."):  # the client normalizes these; still never the file
        assert "secret" not in c.get(raw).text


@pytest.mark.parametrize("model", ["../../etc/passwd", "/etc/passwd", "llama-3-70b/../../x", "nonexistent-model"])
def test_planner_accepts_only_catalog_names(app, model: str) -> None:  # type: ignore[no-untyped-def]
    c = TestClient(app)
    r = c.post("/api/plan/train", json={"model": model, "gpus": 64}, headers=AUTH)
    assert r.status_code == 422
    r = c.post("/api/plan/serve", json={"model": model}, headers=AUTH)
    assert r.status_code == 422


def test_planner_errors_are_422_with_the_planner_message(app) -> None:  # type: ignore[no-untyped-def]
    r = TestClient(app).post("/api/plan/train", json={"model": "llama-3-70b", "gpus": 8}, headers=AUTH)
    assert r.status_code == 422 and "fits" in r.json()["detail"][0]["msg"]


def test_pages_send_a_strict_content_security_policy(app) -> None:  # type: ignore[no-untyped-def]
    c = TestClient(app)
    for path in ("/", "/floor", "/rack?id=x", "/gpu", "/jobs", "/incidents", "/planner"):
        r = c.get(path)
        assert r.status_code == 200 and "script-src 'self'" in r.headers["content-security-policy"]
        assert 'src="/static/app.js"' in r.text and "http" not in r.text.split("<body")[1].replace("https", "")
    assert c.get("/static/app.js").status_code == 200


def test_create_app_validates_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="16 characters"):
        create_app(None, tmp_path, "short")
    with pytest.raises(InputError, match="not a directory"):
        create_app(None, tmp_path / "missing", TOKEN)


def test_undeclared_parameters_are_rejected_everywhere_and_declared_ones_pass(app) -> None:  # type: ignore[no-untyped-def]
    c = TestClient(app)
    for path in ("/api/incidents?run=loop-on&=null", "/api/actions?bogus=1", "/api/overview?x=1"):
        r = c.get(path, headers=AUTH)
        assert r.status_code == 422 and "unknown parameter" in r.text, path
    assert c.get("/api/incidents?run=loop-on", headers=AUTH).status_code == 200
