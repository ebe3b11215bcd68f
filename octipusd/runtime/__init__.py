"""Orchestration: runs and turns (`runs`), vendor session reuse (`sessions`), run events (`events`), prompt dumps."""
