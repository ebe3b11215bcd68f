"""Orchestration: runs and turns (`runs`), vendor session reuse (`sessions`), run events (`events`), prompt dumps,
calls started by hand (`actions`, with their host `manual_host`) and the recovery worker (`recovery`)."""
