"""Fault tests drive the same real daemon as the end-to-end tests."""

from tests.e2e.conftest import claude, octipus  # noqa: F401 - fixtures shared with tests/e2e
