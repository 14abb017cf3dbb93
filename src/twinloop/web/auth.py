"""Bearer-token authorization for the API.

State-changing endpoints (approve/reject an action, start a run, change the policy mode) always need the
token configured at start. Read-only endpoints need it too unless the app was built with ``open_read``.
No token → 401 (with ``WWW-Authenticate: Bearer``); a wrong token → 403. Tokens are compared in constant
time.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

#: Shortest token accepted at start (characters).
MIN_TOKEN_LENGTH = 16

bearer = HTTPBearer(auto_error=False, description="the token given to `twinloop serve` (--token or TWINLOOP_TOKEN)")


@dataclass(frozen=True)
class AuthSettings:
    """What the app checks: the token and whether reads are open."""

    token: str
    open_read: bool = False


def new_token() -> str:
    """A fresh random token (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def _check(request: Request, creds: HTTPAuthorizationCredentials | None) -> None:
    settings: AuthSettings = request.app.state.auth
    if creds is None or not creds.credentials:
        raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    if not secrets.compare_digest(creds.credentials.encode(), settings.token.encode()):
        raise HTTPException(403, "invalid token")


def require_read(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Dependency of read-only endpoints: the token, unless reads are open."""
    if request.app.state.auth.open_read:
        return
    _check(request, creds)


def require_write(request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Dependency of state-changing endpoints: always the token."""
    _check(request, creds)
