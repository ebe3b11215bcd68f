"""Textual TUI client of octipusd (not built yet: octipusctl is the client today)."""
