"""What the review pages ask the store for: the journal page's review batches are filtered by kind
in the query, so any number of newer tool prompts cannot push them out of ``/actions``."""

from __future__ import annotations

from pathlib import Path

from octipusd.store import Store
from octipusd.web.review_pages import INBOX_LIMIT

#: Approval kinds of a recovery review and a tool prompt.
REVIEW, TOOL = "action_recovery", "tool"


def test_review_batches_survive_many_newer_tool_prompts(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'octipus.db'}") as store:
        session = store.create_session(workspace="/w", adapter="claude-code")

        def approval(kind: str) -> str:
            return store.create_approval(
                run_id=None,
                session_id=session.id,
                tool_id="cli-native:Bash",
                subject="ls",
                reason="ASK",
                input={"command": "ls"},
                explanation=None,
                vendor_request_id=None,
                expires_at=None,
                kind=kind,
            ).id

        batch = approval(REVIEW)
        for _ in range(INBOX_LIMIT + 1):
            approval(TOOL)
        assert batch not in {a.id for a in store.list_approvals(limit=INBOX_LIMIT)}  # the old reading lost it
        assert [a.id for a in store.list_approvals(kinds=(REVIEW, "pipeline_replay"), limit=5)] == [batch]
        assert store.list_approvals(kinds=(), limit=5) == []
