"""The twinloop web dashboard: FastAPI app (JSON API under /api, pages fed only by that API), `twinloop serve`."""

from __future__ import annotations

from twinloop.web.app import create_app
from twinloop.web.controller import LoopController, ResponderController

__all__ = ["LoopController", "ResponderController", "create_app"]
