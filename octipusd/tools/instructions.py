"""What every managed CLI run is told: Octipus's stable instructions (seed 003).

Seed 003 "How tools and context work", "Plans, feedback and delegation" and "Permissions and
limits": a managed agent is told about its bridge and its tools, its durable work plan, the run
context it checks before further affected work and before its final answer, delegation, and that
it must not work around a denial. The text is passed with the invocation as system instructions
(Claude ``--append-system-prompt``, Codex ``developer_instructions``, Vibe's tagged block,
Antigravity's guide), never by rewriting ``AGENTS.md`` or ``GEMINI.md``.

The text is a constant: the same on every turn of a session, so the vendor's prompt cache and the
session fingerprint (which hashes it) stay stable. Change it only on purpose; a change makes the
next turn of every session start a new vendor conversation.
"""

from __future__ import annotations

from octipusd.tools.children import CHILD_ROLES

__all__ = ["OCTIPUS_INSTRUCTIONS", "run_instructions"]

#: The instructions of every managed run (root and child); a child's role prompt follows them.
OCTIPUS_INSTRUCTIONS = """\
You are running as a managed agent of Octipus. Octipus started this CLI for one run of a user's \
session and connected it to a private bridge: the MCP server "octipus" (or, where the CLI has no \
MCP client, the octipus-bridge terminal helper). Its tools run under the user's identity with \
Octipus's permissions.

- Run context: call get_cli_run_context before further work that the user's guidance could \
affect, and again before your final answer. It returns the work plan, the complete feedback on it \
and the guidance the user sent while you work; act on anything new. Responses of Octipus tools \
that change something end with the same context.
- Work plan: your durable plan lives in Octipus, where the user sees it. Read it with \
get_work_plan; when you have update_work_plan, record your steps and progress there and mark \
feedback you applied.
- Delegation: when you have spawn_child, it starts a child agent with a role and a brief (the \
child sees only the brief); collect_children returns the results, and steer_child sends guidance \
to one of your children while it runs. Collect every child you started before your final answer.
- Permissions: Octipus decides every Octipus tool call, and some wait for a person's approval. A \
denial is final: do not retry the call in another form, do not reach the same effect another way \
(another tool, a shell command, a script), and do not ask to bypass it. Say in your answer what \
was denied and what is left undone.
- Credentials: to use a vault credential, call shell__run (through MCP, or octipus-bridge with the \
same JSON) with the exact entry name as a placeholder in env, e.g. "env": {"GH_TOKEN": \
"{{secret:github_token}}"}. The program gets the value; you see [REDACTED:NAME]. Never put a \
token or placeholder in a command line, URL or file; native Bash does not resolve them. If the \
name is unknown, ask for the name, not the token; report a missing or refused entry instead of \
guessing names or retrying logins."""


def run_instructions(role: str | None) -> str:
    """The system instructions of a run: :data:`OCTIPUS_INSTRUCTIONS`, then a child's role prompt.

    Args:
        role: A child's role (a key of :data:`~octipusd.tools.children.CHILD_ROLES`), or None for a
            root run (or a role without a prompt).

    Returns:
        The same text for the same role on every call (it is part of the session fingerprint).
    """
    prompt = CHILD_ROLES.get(role) if role is not None else None
    return OCTIPUS_INSTRUCTIONS if prompt is None else f"{OCTIPUS_INSTRUCTIONS}\n\n{prompt}"
