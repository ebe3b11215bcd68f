"""The review pages over the daemon's Unix socket (issue 16 item 2): a real octipusd on a store
seeded with a pending approval, an uncertain action, a kept child worktree on a real git
repository and runs with usage. Each page answers 200 with its content, and agent or vendor text
arrives escaped."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from octipusd.testing.harness import DaemonHarness
from tests.web.review_fixtures import HOSTILE, WORKTREE_ID, ReviewSeed, seed_review, socket_client

UNUSED_MODEL = "http://127.0.0.1:9"
ESCAPED = "&lt;img src=x id=&#34;pwned&#34;&gt;"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ReviewSeed, httpx.Client]]:
    root = tmp_path_factory.mktemp("review")
    workspace = root / "octipus" / "workspace"
    workspace.mkdir(parents=True)
    seed = seed_review(root, workspace)
    env = {"OCTIPUS_DATABASE_URL": seed.url, "OCTIPUS_WORKTREES_DIR": str(seed.worktrees)}
    with (
        DaemonHarness(root / "octipus", UNUSED_MODEL, extra_env=env) as daemon,
        socket_client(daemon.socket) as client,
    ):
        yield seed, client


def page(client: httpx.Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code, response.text[:2000])
    assert response.headers["content-type"].startswith("text/html")
    text = response.text
    assert HOSTILE not in text, f"{path} shows agent text unescaped"
    return text


def test_inbox_lists_the_pending_approval_and_the_uncertain_action(
    seeded: tuple[ReviewSeed, httpx.Client],
) -> None:
    seed, client = seeded
    text = page(client, "/inbox")
    assert f'href="/approvals/{seed.approval_id}"' in text and "cli-native:Bash" in text
    assert f"rm -rf build {ESCAPED}" in text
    assert f'href="/actions#action-{seed.action_id}"' in text and "deploy.push" in text
    assert 'data-live="/fragments/inbox"' in text and "Enable notifications" in text
    assert '<script src="/static/review.js"' in text and "onclick" not in text and "style=" not in text
    fragment = page(client, "/fragments/inbox")
    assert seed.approval_id in fragment and "<html" not in fragment


def test_actions_page_explains_the_action_and_offers_each_decision(
    seeded: tuple[ReviewSeed, httpx.Client],
) -> None:
    seed, client = seeded
    text = page(client, "/actions")
    assert f'id="action-{seed.action_id}"' in text
    assert "Outcome uncertain: partial effects may have occurred" in text  # the API's explanation
    assert f"the connection dropped {ESCAPED}" in text
    for path in ("probe", "compensate", "contain"):
        assert f'data-api="POST /v1/actions/{seed.action_id}/{path}"' in text
    assert "Probe: run the tool&#39;s own verification check" in text
    assert 'data-api="POST /v1/actions/review"' in text and seed.usage.with_row in text


def test_worktrees_list_and_the_branch_diff(seeded: tuple[ReviewSeed, httpx.Client]) -> None:
    seed, client = seeded
    listing = page(client, "/worktrees")
    assert f'href="/worktrees/{WORKTREE_ID}"' in listing and "octipus/c1" in listing and "kept" in listing
    text = page(client, f"/worktrees/{WORKTREE_ID}")
    assert f'data-session-id="{seed.usage.with_row}"' in text  # comments go to the child's session
    assert f'href="/runs/{seed.child_run_id}"' in text and f"kept for review {ESCAPED}" in text
    assert 'data-file="notes.txt"' in text and "@@ -1,3 +1,4 @@" in text
    rows = re.findall(
        r'<tr class="dl (\w+)" data-line="(\d+)" data-side="(\w+)">\s*<td class="ln">(\d*)</td><td class="ln">(\d*)</td>',
        text,
    )
    assert rows == [
        ("ctx", "1", "new", "1", "1"),
        ("del", "2", "old", "2", ""),
        ("add", "2", "new", "", "2"),
        ("ctx", "3", "new", "3", "3"),
        ("add", "4", "new", "", "4"),
    ]
    assert "TWO &lt;b&gt;bold&lt;/b&gt;" in text  # file content escaped too
    assert f'data-api="POST /v1/worktrees/{WORKTREE_ID}/discard"' in text and "data-confirm=" in text
    assert client.get("/worktrees/nope").status_code == 404
    assert client.get("/worktrees/a%20b").status_code == 400


def test_usage_page_per_session_model_row_and_run(seeded: tuple[ReviewSeed, httpx.Client]) -> None:
    seed, client = seeded
    text = page(client, "/usage")
    for by in ("session", "model_row", "run"):
        assert f'data-by="{by}"' in text
    assert f"refactor {ESCAPED}" in text and "sonnet-row" in text and "(no model row)" in text
    assert (
        "$1.5000<" in text and "$0.2500<" in text and ">estimated<" in text and "+3 without cost" in text
    )  # the parent and child runs have none
    per_run = text[text.index('data-by="run"') :]
    per_run = per_run[: per_run.index("</table>")]
    assert ">Runs<" not in per_run and ">Cost<" in per_run  # one run per row: no Runs column
    assert 'href="/sessions/' in per_run  # each run names its session, linked
    per_session = text[text.index('data-by="session"') :]
    assert f'href="/sessions/{seed.usage.with_row}"' in per_session[: per_session.index("</table>")]
    report = client.get("/v1/usage", params={"by": "model_row"}).json()
    assert {g["name"] for g in report["groups"]} == {"sonnet-row", None}
    assert report["estimated"] and report["runs"] == 5  # 3 usage runs, the parent and its child
    refused = client.get("/v1/usage", params={"by": "nope"})  # a parameter: a 400 naming it
    assert refused.status_code == 400 and refused.json()["message"].startswith("query parameter by: ")


def test_health_page_shows_each_adapter_and_the_store(seeded: tuple[ReviewSeed, httpx.Client]) -> None:
    _, client = seeded
    health = client.get("/v1/health").json()
    text = page(client, "/health")
    assert health["database"] in text or "sqlite" in text
    for adapter in health["adapters"]:
        assert f'data-adapter="{adapter["adapter"]}"' in text
        assert adapter["searched_path"].split(":")[0] in text
    searched = {a["searched_path"] for a in health["adapters"]}
    assert len(searched) == 1 and text.count(searched.pop()) == 1  # the same PATH shown once
    assert "Worktree reaper" in text and "Notifier" in text
    assert "Notifications are off" in text and "notify.urls" in text
    # the page's address is told (never its token: the page has no way to know it)
    assert f"Served on <code>{health['web']['origin']}</code>" in text
