"""Every page in real headless Chromium at 1400×1000 and 800×600: screenshots kept in ``tests/artifacts/web/``
(``screen-<page>-<width>.png``), and what breaks a page at either width fails: horizontal overflow, tile text
that is clipped or overlaps another tile, text without contrast on its tile, a chart that did not draw. The
self-contained HTML report is checked the same way, opened from a file with every network request refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from twinloop.report import sim_report
from twinloop.web import create_app

from .conftest import TOKEN, Loop, Server, loaded, shot
from .webdata import HOT_RACK

pytestmark = pytest.mark.integration
SIZES = ((1400, 1000), (800, 600))
PAGES = (
    ("overview", "/"),
    ("floor", "/floor"),
    ("floor-power", "/floor?metric=power"),
    ("rack", "/rack?id=" + HOT_RACK),
    ("gpu", "/gpu?id=" + HOT_RACK + "/n01/g0"),
    ("jobs", "/jobs"),
    ("incidents", "/incidents"),
    ("planner", "/planner"),
)

#: Runs in the page: what is wrong with it (an empty list when nothing is).
PROBLEMS_JS = (Path(__file__).parent / "problems.js").read_text()


@pytest.fixture
def open_server(site_db: Path, loop: Loop) -> Iterator[Server]:
    app = create_app(site_db, site_db.parent, TOKEN, open_read=True, controller=loop.controller, live_interval_s=30)
    with Server(app) as s:
        yield s


def settle(page: Any) -> None:
    """Wait until every chart the page asked for is drawn (or said it has no data)."""
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-chart]')].every("
        "(e) => e.classList.contains('chart-empty') || e.querySelector('canvas'))",
        timeout=20_000,
    )


@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_page_fits_and_draws(browser: Any, open_server: Server, width: int, height: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    failures = {}
    for name, path in PAGES:
        page.goto(open_server.url + path)
        loaded(page)
        if name == "planner":
            page.click("#train-form button[type=submit]")
            page.wait_for_selector("#plan-knee", timeout=30_000)
            page.click("#serve-form button[type=submit]")
            page.wait_for_selector("#serve-ttft", timeout=30_000)
        if name == "jobs":
            page.wait_for_selector("#job-detail [data-chart]")
        settle(page)
        shot(page, f"screen-{name}-{width}")
        problems = page.evaluate(PROBLEMS_JS)
        if problems:
            failures[name] = problems
    page.close()
    assert failures == {} and errors == []


def test_jobs_page_fills_tokens_per_s(browser: Any, open_server: Server) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(open_server.url + "/jobs")
    loaded(page)
    header = page.locator("#jobs tr").first.locator("th").all_inner_texts()
    row = page.locator("#jobs tr").nth(1).locator("td").all_inner_texts()
    assert row[header.index("tokens/s")].replace(",", "") == "100000"
    page.close()


def test_floor_colours_follow_fixed_levels(browser: Any, open_server: Server) -> None:
    """The hot rack (~85 °C against an 89 °C slowdown) is in the '< 5 °C' level, a cool one (~60 °C) in the
    '≥ 20 °C' level, whatever the other racks read."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(open_server.url + "/floor")
    loaded(page)
    hot = page.get_attribute(f"a.rack[data-rack='{HOT_RACK}']", "data-fill")
    cool = page.get_attribute("a.rack[data-rack='dc9/r01/k01']", "data-fill")
    levels = {lv.label: lv.fill for lv in __import__("twinloop.report.levels", fromlist=["x"]).TEMP_HEADROOM_LEVELS}
    assert hot == levels["< 5 °C to slowdown"] and cool == levels["≥ 20 °C below"]
    page.close()


def test_straggler_incident_links_to_its_gpu(browser: Any, open_server: Server) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(open_server.url + "/incidents")
    loaded(page)
    page.click("a.gpu-link:has-text('dc9/r01/k01/n01/g2')")
    page.wait_for_url("**/gpu?id=*")
    loaded(page)
    assert "dc9/r01/k01/n01/g2" in page.inner_text("h1")
    page.close()


@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_report_draws_offline_and_fits(browser: Any, site_db: Path, tmp_path: Path, width: int, height: int) -> None:
    out = sim_report(
        site_db,
        tmp_path / "report.html",
        summary={"energy": {"facility_kwh": 1.5}, "pue": 1.2, "jobs": []},
        comparison=({"energy_kwh": 10.0, "ettr": 0.8}, {"energy_kwh": 9.0, "ettr": 0.9}),
    )
    context = browser.new_context(viewport={"width": width, "height": height}, offline=True)
    requests: list[str] = []
    context.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    settle(page)
    shot(page, f"screen-report-{width}")
    assert page.locator("[data-chart] canvas").count() >= 5
    assert page.evaluate(PROBLEMS_JS) == []
    assert errors == [] and [r for r in requests if not r.startswith("file:")] == []
    context.close()
