"""twinloop: plan, simulate and operate GPU clusters for LLMs as one machine."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("twinloop")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+src"

__all__ = ["__version__"]
