"""Fixtures of the page tests: a real octipusd and the real claude on a scripted model (the e2e
``octipus`` factory), and an HTTP client for the pages on the daemon's Unix socket."""

from __future__ import annotations

import httpx

from tests.e2e.conftest import Env, claude, octipus

__all__ = ["claude", "octipus", "pages"]


def pages(env: Env) -> httpx.Client:
    """A client for the daemon's pages (``/``, ``/runs/...``) over its Unix socket (no access checks
    there); close it after use."""
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(env.daemon.socket)), base_url="http://octipusd", timeout=30
    )
