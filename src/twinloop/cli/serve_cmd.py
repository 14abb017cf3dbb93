"""`twinloop serve`: the web dashboard and JSON API over a telemetry store."""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path

import typer

from twinloop.cli.app import app
from twinloop.cli.output import JSON_OPTION, guarded, print_json, stderr
from twinloop.errors import InputError

TOKEN_ENV = "TWINLOOP_TOKEN"
DEFAULT_LISTEN = "127.0.0.1:8000"


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 as ``[::1]:8000``) → (host, port).

    Raises:
        InputError: not ``HOST:PORT``, a host that is not an IP address or ``localhost``, or a bad port.
    """
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise InputError("--listen", "", f"{value!r} is not HOST:PORT (e.g. {DEFAULT_LISTEN})")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise InputError("--listen", "", f"host {host!r} is not an IP address or localhost") from None
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise InputError("--listen", "", f"port {port_text!r} is not in 1-65535")
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127.0.0.0/8, ::1)."""
    return host == "localhost" or ipaddress.ip_address(host).is_loopback


@app.command()
def serve(
    db: Path = typer.Option(Path("twinloop-out/telemetry.duckdb"), "--db", help="Telemetry DuckDB file."),
    listen: str = typer.Option(DEFAULT_LISTEN, "--listen", help="HOST:PORT to bind (loopback by default)."),
    token: str | None = typer.Option(
        None, "--token", help=f"Bearer token for the API (default: ${TOKEN_ENV}, else a new one printed on stderr)."
    ),
    open_read: bool = typer.Option(False, "--open-read", help="Let read-only endpoints answer without the token."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Allow a non-loopback --listen address."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Directory of reports (default: the DB's folder)."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Serve the dashboard (overview, floor map, jobs, incidents, planner) and the JSON API under /api."""
    from twinloop.web.auth import MIN_TOKEN_LENGTH, new_token

    def prepare() -> tuple[str, int, str, bool, Path]:
        host, port = parse_listen(listen)
        if not is_loopback(host) and not allow_remote:
            raise InputError("--listen", "", f"{host} is not a loopback address; add --allow-remote to expose it")
        given = token if token is not None else os.environ.get(TOKEN_ENV)
        if given is not None and len(given) < MIN_TOKEN_LENGTH:
            raise InputError("--token", "", f"must be at least {MIN_TOKEN_LENGTH} characters, got {len(given)}")
        folder = data_dir if data_dir is not None else db.parent
        if not folder.is_dir():
            raise InputError("--data-dir", "", f"{folder}: not a directory")
        return host, port, given or new_token(), given is None, folder

    host, port, tok, generated, folder = guarded(prepare)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    if json_out:
        print_json(
            {
                "url": url,
                "api": url + "api/",
                "openapi": url + "api/openapi.json",
                "db": str(db),
                "data_dir": str(folder),
                "open_read": open_read,
                "token_generated": generated,
                "token": tok if generated else None,
            }
        )
        sys.stdout.flush()
    else:
        stderr.print(f"twinloop dashboard on {url}#token=<token>  (API {url}api/, schema {url}api/openapi.json)")
    if generated:
        stderr.print(f"generated API token: {tok}  (set {TOKEN_ENV} or --token to choose one)", highlight=False)
    import uvicorn

    from twinloop.telemetry.store.control import control_path
    from twinloop.web import create_app
    from twinloop.web.controller import DbController

    # A `twinloop watch --db` on this store: approve/reject reach it through its control file.
    ctl = DbController(control_path(db)) if control_path(db).is_file() else None
    # Host check (DNS rebinding): loopback names and the bound host; a wildcard bind names no host to check
    hosts = ("*",) if host in ("0.0.0.0", "::") else (host,)
    web = guarded(lambda: create_app(db, folder, tok, open_read=open_read, controller=ctl, allowed_hosts=hosts))
    uvicorn.run(web, host=host, port=port, log_level="warning")
