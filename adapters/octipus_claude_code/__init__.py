"""Octipus package."""
