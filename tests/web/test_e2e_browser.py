"""End to end in headless Chromium (Debian's ``chromium``, driven by Playwright) against a real uvicorn server:
every page loads, site → rack → GPU by clicking, the numbers shown equal the API's, an action is approved with
the token and refused without it, the planner plots its power sweep. Screenshots of every page are kept in
``tests/artifacts/web/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from twinloop.web import create_app

from .conftest import AUTH, TOKEN, Loop, Server, loaded, shot
from .webdata import HOT_RACK

pytestmark = pytest.mark.integration


@pytest.fixture
def open_server(site_db: Path, loop: Loop) -> Iterator[Server]:
    """Reads open (so a page loads without a token), writes still need it."""
    app = create_app(site_db, site_db.parent, TOKEN, open_read=True, controller=loop.controller, live_interval_s=0.3)
    with Server(app) as s:
        yield s


def api(server: Server, path: str) -> Any:
    return httpx.get(server.url + path, headers=AUTH, timeout=10).json()


def value(page: Any, selector: str) -> float:
    return float(page.get_attribute(selector, "data-value"))


def test_click_from_site_to_rack_to_gpu(browser: Any, open_server: Server) -> None:
    s = open_server
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(s.url + "/#token=" + TOKEN)
    loaded(page)
    overview = api(s, "/api/overview")
    assert value(page, "#facility-power") == pytest.approx(overview["power"]["facility_power_w"])
    assert value(page, "#pue") == pytest.approx(overview["power"]["pue"])
    assert value(page, "#throttled") == overview["throttling"]["gpus_throttled"] == 8
    page.wait_for_selector("#power-chart canvas")
    shot(page, "overview")

    page.click("nav a[href='/floor']")
    loaded(page)
    assert page.locator("a.rack").count() == 6
    shot(page, "floor")
    page.click(f"a.rack[data-rack='{HOT_RACK}']")
    page.wait_for_url("**/rack?id=*")
    loaded(page)
    rack = api(s, "/api/rack?id=" + HOT_RACK)
    assert value(page, "#rack-power") == pytest.approx(rack["power_w"])
    page.wait_for_function("document.querySelectorAll('.spark canvas').length === 24")
    assert page.locator("a.gpu-link").count() == 8
    shot(page, "rack")
    page.locator("a.gpu-link").first.click()
    page.wait_for_url("**/gpu?id=*")
    loaded(page)
    gpu = api(s, "/api/gpu?id=" + HOT_RACK + "/n01/g0")
    assert value(page, "#gpu-power") == pytest.approx(gpu["latest"]["power_w"])
    assert page.inner_text("#gpu-reasons").strip() == "sw_thermal"
    assert page.locator("[data-chart] canvas").count() == 3
    shot(page, "gpu")
    assert errors == []
    page.close()


def test_jobs_incidents_planner_pages(browser: Any, open_server: Server) -> None:
    s = open_server
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.goto(s.url + "/jobs")
    loaded(page)
    page.wait_for_selector("#job-detail [data-chart] canvas")
    row = page.locator("#jobs tr").nth(1).inner_text()
    job = api(s, "/api/jobs")[0]
    assert job["name"] in row and f"{job['checkpoints']}\t{job['restarts']}" in row
    shot(page, "jobs")

    page.goto(s.url + "/incidents")
    loaded(page)
    assert page.locator("#pending button.approve").count() == 2
    shot(page, "incidents")

    page.goto(s.url + "/planner")
    loaded(page)
    page.fill("#train-form input[name=gpus]", "256")
    page.click("#train-form button[type=submit]")
    page.wait_for_selector("#plan-knee", timeout=30_000)
    expected = httpx.post(
        s.url + "/api/plan/train",
        json={"model": "llama-3-70b", "gpu": "h100-sxm", "gpus": 256, "precision": "bf16"},
        headers=AUTH,
        timeout=30,
    ).json()
    assert value(page, "#plan-knee") == pytest.approx(expected["knee_power_limit_w"])
    assert value(page, "#plan-step") == pytest.approx(expected["step_time_s"])
    page.click("#serve-form button[type=submit]")
    page.wait_for_selector("#serve-ttft", timeout=30_000)
    shot(page, "planner")
    page.close()


def test_approve_needs_the_token(browser: Any, open_server: Server, loop: Loop) -> None:
    s = open_server
    context = browser.new_context(viewport={"width": 1300, "height": 800})
    page = context.new_page()
    page.goto(s.url + "/incidents")  # no token in this tab
    loaded(page)
    page.locator("#pending button.approve").first.click()
    page.wait_for_selector(".notice.error")
    assert "Refused: 401" in page.inner_text("#notice")
    assert loop.adapter.applied == [] and len(api(s, "/api/actions/pending")) == 2
    shot(page, "incidents-refused")

    page.fill("#token", TOKEN)  # enter the token in the header form
    page.click("#tokenform button[type=submit]")
    page.wait_for_selector("#notice:has-text('Token set')")
    page.locator("#pending button.approve").first.click()
    page.wait_for_selector("#notice:has-text('approved')")
    assert "approved: applied" in page.inner_text("#notice")
    assert len(loop.adapter.applied) == 1 and len(api(s, "/api/actions/pending")) == 1
    page.wait_for_selector("#pending tr[data-action]", state="attached")
    assert page.locator("#pending tr[data-action]").count() == 1  # the page refreshed after the approval
    shot(page, "incidents-approved")
    context.close()
