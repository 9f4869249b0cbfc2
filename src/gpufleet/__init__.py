"""gpufleet: plan, schedule and account for GPU clusters for AI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpufleet")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
