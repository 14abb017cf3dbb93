"""twinloop: plan, simulate and operate GPU clusters for LLMs as one machine."""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # Looked up on first use: importlib.metadata costs ~50 ms, too much for every `twinloop` start.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("twinloop")
        except PackageNotFoundError:  # running from a source tree without an install
            value = "0.0.0+src"
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module 'twinloop' has no attribute {name!r}")
