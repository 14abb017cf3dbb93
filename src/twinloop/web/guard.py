"""What every request passes before the app reads a byte of its body: the Host header, the token of a
state-changing request, and the body's size.

Order matters (issue 19): a 200 MB JSON without a token used to be parsed (11.5 s, 1.47 GB) before its 401. Here
the token of a POST/PUT/PATCH/DELETE under ``/api/`` is checked from the headers alone, a declared
``Content-Length`` over the cap is refused with 413 at once, and a body sent without a length (chunked) is cut
off with 413 as soon as it passes the cap. The Host check defeats DNS rebinding against a server started with
``--open-read``: a page on ``evil.example`` that resolves to 127.0.0.1 still sends ``Host: evil.example``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from twinloop.web.auth import AuthSettings

#: Largest request body accepted, bytes (the biggest legitimate body, a run request, is a few hundred bytes).
MAX_BODY_BYTES = 1 << 20
#: Host names always allowed (loopback); ``testserver`` is the name Starlette's in-process test client sends.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "testserver"})
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: POSTs that change nothing (the planner computes an answer): with ``--open-read`` they are reads.
_READ_POSTS = ("/api/plan/",)


def host_name(header: str) -> str:
    """The host of a ``Host`` header, without port or IPv6 brackets, lower case."""
    h = header.strip().lower()
    if h.startswith("["):
        return h[1 : h.find("]")] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


class RequestGuard:
    """ASGI middleware: Host check, token of writes before the body, body cap.

    Args:
        app: the wrapped application.
        auth: the token settings.
        allowed_hosts: extra host names accepted besides the loopback ones (the bound host); ``"*"`` accepts any.
        max_body_bytes: the body cap, bytes.
    """

    def __init__(
        self,
        app: ASGIApp,
        auth: AuthSettings,
        allowed_hosts: Collection[str] = (),
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.auth = auth
        self.hosts = LOOPBACK_HOSTS | {host_name(h) for h in allowed_hosts}
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: refuse a foreign Host, an unauthenticated write or an oversized body; else pass it on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if "*" not in self.hosts and host_name(headers.get("host", "")) not in self.hosts:
            await _reply(send, 400, "invalid Host header (allowed: loopback names and the bound host)")
            return
        path: str = scope.get("path", "")
        is_read_post = self.auth.open_read and path.startswith(_READ_POSTS)
        if scope.get("method", "GET") in _WRITES and path.startswith("/api/") and not is_read_post:
            auth = headers.get("authorization", "")
            scheme, _, token = auth.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                await _reply(send, 401, "missing bearer token", {"WWW-Authenticate": "Bearer"})
                return
            if not secrets.compare_digest(token.strip().encode(), self.auth.token.encode()):
                await _reply(send, 403, "invalid token")
                return
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                await _reply(send, 400, "invalid Content-Length")
                return
            if int(length) > self.max_body_bytes:
                await _reply(send, 413, f"request body over {self.max_body_bytes} bytes")
                return
        if length is None and scope.get("method", "GET") in _WRITES:
            # no declared length (chunked): read at most the cap here, then hand the app what was read
            body, more = bytearray(), True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away
                body += message.get("body", b"")
                more = bool(message.get("more_body", False))
                if len(body) > self.max_body_bytes:
                    await _reply(send, 413, f"request body over {self.max_body_bytes} bytes")
                    return
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": bytes(body), "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)


async def _reply(send: Send, status: int, detail: str, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
