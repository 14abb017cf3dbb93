"""``python -m twinloop.telemetry.docgen > docs/telemetry-fields.md``: render the field table."""

from __future__ import annotations

import sys

from twinloop.telemetry.fields import render_markdown

if __name__ == "__main__":
    sys.stdout.write(render_markdown())
