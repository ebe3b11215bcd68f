"""Octipus: a daemon that orchestrates vendor coding-agent CLIs.

``octipusd.__version__`` is read from the installed package's metadata on first use (importing
:mod:`importlib.metadata` costs a client's start-up more than it needs).
"""

from __future__ import annotations


def __getattr__(name: str) -> str:
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("octipus")
    except PackageNotFoundError:  # running from a source tree without installation
        found = "0.0.0"
    globals()["__version__"] = found
    return found
