"""HTML shells of the dashboard pages. They hold no data: ``static/app.js`` fills them from the JSON API.

Each page is the same shell with its name in ``data-page``; the navigation marks the current one. The shell
sends a strict Content-Security-Policy (scripts and styles only from this server, no inline script), so a
value from the store shown on a page can never run as code.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

#: (path, page name, navigation label); pages without a label are reached by clicking (rack, GPU).
PAGES: tuple[tuple[str, str, str], ...] = (
    ("/", "overview", "Overview"),
    ("/floor", "floor", "Floor"),
    ("/rack", "rack", ""),
    ("/gpu", "gpu", ""),
    ("/jobs", "jobs", "Jobs"),
    ("/incidents", "incidents", "Incidents"),
    ("/planner", "planner", "Planner"),
)

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def shell(page: str, title: str) -> str:
    """The HTML of one page."""
    nav = "".join(
        f'<a href="{path}"{" class=active" if name == page else ""}>{html.escape(label)}</a>'
        for path, name, label in PAGES
        if label
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>twinloop · {html.escape(title)}</title>
<link rel="stylesheet" href="/static/style.css">
</head>
<body data-page="{html.escape(page)}">
<header>
  <a class="brand" href="/">twinloop</a>
  <nav>{nav}</nav>
  <span id="live" class="badge" title="live updates">connecting…</span>
  <form id="tokenform" autocomplete="off">
    <input id="token" type="password" placeholder="API token" aria-label="API token" autocomplete="new-password">
    <button type="submit">Use token</button>
  </form>
</header>
<div id="notice" class="notice" hidden></div>
<main id="main"><p class="muted">Loading…</p></main>
<script src="/vendor/echarts.min.js"></script>
<script src="/vendor/twinloop-charts.js"></script>
<script src="/static/app.js"></script>
</body>
</html>
"""


def _handler(body: str) -> Callable[[], HTMLResponse]:
    def handler() -> HTMLResponse:
        return HTMLResponse(body, headers=SECURITY_HEADERS)

    return handler


def router() -> APIRouter:
    """The page routes (not part of the JSON API's schema)."""
    r = APIRouter(include_in_schema=False)
    r.add_api_route("/favicon.ico", lambda: Response(status_code=204), methods=["GET"])
    titles = {"rack": "Rack", "gpu": "GPU"}
    for path, name, label in PAGES:
        body = shell(name, label or titles.get(name, name))
        r.add_api_route(path, _handler(body), methods=["GET"], response_class=HTMLResponse, name=f"page_{name}")
    return r
