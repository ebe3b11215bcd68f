"""Octipus: a daemon that orchestrates vendor coding-agent CLIs."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("octipus")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
