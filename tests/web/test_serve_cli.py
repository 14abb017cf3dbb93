"""`twinloop serve` argument validation (exit code 2, one stderr line) and its --json document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from hypothesis import given
from hypothesis import strategies as st

from twinloop.cli.serve_cmd import is_loopback, parse_listen
from twinloop.errors import InputError


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "0.0.0.0:8000"], "not a loopback address"),
        (["--listen", "10.1.2.3:80"], "not a loopback address"),
        (["--listen", "example.com:80"], "not an IP address"),
        (["--listen", "127.0.0.1"], "not HOST:PORT"),
        (["--listen", "127.0.0.1:0"], "not in 1-65535"),
        (["--listen", "127.0.0.1:http"], "not in 1-65535"),
        (["--token", "short"], "at least 16 characters"),
        (["--data-dir", "/nonexistent/dir"], "not a directory"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(cli: Any, tmp_path: Path, args: list[str], message: str) -> None:
    result = cli("serve", "--db", str(tmp_path / "t.duckdb"), *args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_json_prints_url_and_generated_token(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append({"app": app, **kw}))
    monkeypatch.delenv("TWINLOOP_TOKEN", raising=False)
    result = cli("serve", "--db", str(tmp_path / "t.duckdb"), "--listen", "127.0.0.1:8123", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["url"] == "http://127.0.0.1:8123/" and doc["token_generated"] is True and len(doc["token"]) >= 16
    assert doc["token"] in result.stderr  # printed on stderr too
    assert calls and calls[0]["host"] == "127.0.0.1" and calls[0]["port"] == 8123
    assert calls[0]["app"].state.auth.token == doc["token"]


def test_token_from_environment_is_not_printed(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: None)
    monkeypatch.setenv("TWINLOOP_TOKEN", "env-token-0123456789")
    result = cli("serve", "--db", str(tmp_path / "t.duckdb"), "--listen", "[::1]:8124", "--allow-remote", "--json")
    doc = json.loads(result.stdout)
    assert doc["token"] is None and doc["token_generated"] is False and "env-token" not in result.stderr
    assert doc["url"] == "http://[::1]:8124/"


def test_allow_remote_permits_a_public_address(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.append(kw["host"]))
    result = cli(
        "serve",
        "--db",
        str(tmp_path / "t.duckdb"),
        "--listen",
        "0.0.0.0:8000",
        "--allow-remote",
        "--token",
        "x" * 20,
        "--json",
    )
    assert result.exit_code == 0 and seen == ["0.0.0.0"]


@given(st.text(max_size=40))
def test_parse_listen_never_crashes_on_garbage(text: str) -> None:
    try:
        host, port = parse_listen(text)
    except InputError as exc:
        assert str(exc).startswith("--listen: ")
    else:
        assert 1 <= port <= 65535 and isinstance(is_loopback(host), bool)


@given(st.ip_addresses(), st.integers(1, 65535))
def test_parse_listen_round_trips_addresses(addr: Any, port: int) -> None:
    text = f"[{addr}]:{port}" if addr.version == 6 else f"{addr}:{port}"
    host, p = parse_listen(text)
    assert (host, p) == (str(addr), port) and is_loopback(host) == addr.is_loopback
