"""The bounds of one API request, named once (issue 14 item 10).

A module with no imports, so a client (``octipusctl``'s help text) reads the same numbers as the
daemon without loading FastAPI; :mod:`octipusd.api.limits` enforces them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["API_LIMITS", "RequestLimits"]


@dataclass(frozen=True)
class RequestLimits:
    """Bounds of one API request (sizes in bytes or characters, as named).

    Attributes:
        max_body_bytes: Largest request body (bytes); a prompt sent from a file is the big one.
        max_text_chars: Longest string anywhere in a JSON body: prompts, guidance, notes, tool
            arguments (characters).
        max_name_chars: Longest name or id: a body's names, ids, tool ids and users, every path
            segment and every query value (characters; four bytes each at most stays under
            PostgreSQL's index row size).
        max_path_chars: Longest file-system path in a body (``workspace``; characters, Linux's
            ``PATH_MAX``).
        max_json_depth: Deepest nesting of objects and arrays in a JSON body (levels).
        max_int: Largest integer magnitude in a JSON body (the 64-bit range of the store's
            ``BIGINT`` columns; a field meeting a narrower column declares its column's bound,
            :mod:`octipusd.api.limits`).
        max_page_records: Largest ``limit`` of a list route (records).
        max_ttl_seconds: Longest ``ttl_seconds`` of a grant (ten years, in seconds).
        max_inline_check_bytes: Largest JSON body checked on the event loop (bytes); a bigger one
            is checked in a worker thread, so it does not hold up the runs the loop serves.
    """

    max_body_bytes: int = 32 * 1024 * 1024
    max_text_chars: int = 16 * 1024 * 1024
    max_name_chars: int = 256
    max_path_chars: int = 4096
    max_json_depth: int = 64
    max_int: int = 2**63 - 1
    max_page_records: int = 100_000
    max_ttl_seconds: float = 10 * 365 * 86400.0
    max_inline_check_bytes: int = 64 * 1024


#: The daemon's request limits.
API_LIMITS = RequestLimits()
