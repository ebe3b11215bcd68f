"""The one way Octipus runs git on a user's repository (FACTS.md §1, "Server git calls").

Every call goes through GitPython's command handle with hooks, fsmonitor and signing turned
off, as ``Octipus agent <octipus-agent@localhost>``, under a deadline: :attr:`GitLimits.read_s`
for reads, :attr:`GitLimits.write_s` for anything that changes a ref, the index or the tree.
A git that cannot be started or that times out is a :class:`~octipusd.errors.WorktreeError`;
a non-zero exit is returned as a :class:`GitResult` (callers decide what it means) or, through
:meth:`Git.read` / :meth:`Git.write`, raised as a ``WorktreeError`` quoting git's stderr.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

import git as gitpython

from octipusd.errors import WorktreeError

__all__ = [
    "AGENT_EMAIL",
    "AGENT_NAME",
    "GIT_LIMITS",
    "SERVER_CONFIG",
    "Git",
    "GitLimits",
    "GitResult",
    "printable",
]

AGENT_NAME: Final = "Octipus agent"
AGENT_EMAIL: Final = "octipus-agent@localhost"

#: ``-c`` settings of every server-side git call: no hook, no fsmonitor daemon, no background
#: maintenance, no signing prompt, and Octipus as the author of what it commits.
SERVER_CONFIG: Final[tuple[str, ...]] = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "gc.auto=0",  # no detached ``gc --auto`` left running after a commit or merge
    "maintenance.auto=false",
    "commit.gpgsign=false",
    "tag.gpgsign=false",
    f"user.name={AGENT_NAME}",
    f"user.email={AGENT_EMAIL}",
)

#: The identity variables win over ``user.*``, so they are set too (a daemon's environment may
#: carry a person's), and git never prompts for anything.
_ENV: Final[dict[str, str]] = {
    "GIT_AUTHOR_NAME": AGENT_NAME,
    "GIT_AUTHOR_EMAIL": AGENT_EMAIL,
    "GIT_COMMITTER_NAME": AGENT_NAME,
    "GIT_COMMITTER_EMAIL": AGENT_EMAIL,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
}


@dataclass(frozen=True)
class GitLimits:
    """Deadlines of server git calls and the size of quoted git output.

    Attributes:
        read_s: Seconds a read (status, rev-parse, diff...) may take.
        write_s: Seconds a write (worktree add/remove, commit, merge...) may take.
        detail_chars: Characters of git's stderr kept in an error or a merge detail.
        diff_chars: Characters of a kept branch's diff returned to a person (the rest is cut
            and the cut is said).
    """

    read_s: float = 30.0
    write_s: float = 15 * 60.0
    detail_chars: int = 500
    diff_chars: int = 2_000_000


GIT_LIMITS: Final = GitLimits()


def printable(text: str) -> str:
    """Git output as valid UTF-8 text: bytes that were not UTF-8 (GitPython keeps them as lone
    surrogates) become U+FFFD, so the text can be sent as JSON or written to a terminal."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@dataclass(frozen=True)
class GitResult:
    """What one git call answered: its exit status and its output (trailing newline removed)."""

    status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == 0


class Git:
    """Git commands run in one directory (a project or a worktree), the server's way.

    Args:
        cwd: Directory git runs in.
        limits: Deadlines and quoting sizes.
    """

    def __init__(self, cwd: Path, limits: GitLimits = GIT_LIMITS) -> None:
        self.cwd = cwd
        self.limits = limits
        self._handle = gitpython.Git(str(cwd))

    def run(self, *args: str, write: bool = False) -> GitResult:
        """Run ``git <args>`` and return its status and output, whatever the status.

        Raises:
            WorktreeError: the directory is gone (git would run elsewhere), git could not be
                started, or it ran past its deadline (it is killed).
        """
        if not self.cwd.is_dir():
            raise WorktreeError(f"{self.cwd} is not a directory; git {args[0]} was not run")
        timeout = self.limits.write_s if write else self.limits.read_s
        argv = ["git"]
        for setting in SERVER_CONFIG:
            argv += ["-c", setting]
        argv += args
        env = dict(_ENV) if write else {**_ENV, "GIT_OPTIONAL_LOCKS": "0"}
        try:
            status, out, err = self._handle.execute(
                argv,
                with_extended_output=True,
                with_exceptions=False,
                kill_after_timeout=timeout,
                env=env,
            )
        except gitpython.GitCommandNotFound as exc:
            raise WorktreeError(f"git could not be started in {self.cwd}: {exc}") from exc
        if status < 0:  # GitPython killed it at the deadline
            raise WorktreeError(f"git {args[0]} did not finish within {timeout:g} s in {self.cwd}")
        return GitResult(status, str(out), str(err))

    def read(self, *args: str) -> str:
        """Run a read and return its stdout.

        Raises:
            WorktreeError: git failed (its stderr quoted), could not start or timed out.
        """
        return self._checked(args, self.run(*args))

    def write(self, *args: str) -> str:
        """Run a write (the long deadline) and return its stdout.

        Raises:
            WorktreeError: git failed (its stderr quoted), could not start or timed out.
        """
        return self._checked(args, self.run(*args, write=True))

    def quote(self, text: str) -> str:
        """Git output cut to :attr:`GitLimits.detail_chars`."""
        return text.strip()[: self.limits.detail_chars]

    def _checked(self, args: tuple[str, ...], result: GitResult) -> str:
        if not result.ok:
            said = self.quote(result.stderr or result.stdout)
            raise WorktreeError(
                f"git {' '.join(args[:2])} failed in {self.cwd} (exit {result.status}): {said}"
            )
        return result.stdout

    # ------------------------------------------------------------------ common questions

    def toplevel(self) -> Path | None:
        """The real path of the working tree's top level, or None outside a working tree."""
        result = self.run("rev-parse", "--show-toplevel")
        return Path(result.stdout).resolve() if result.ok and result.stdout else None

    def head_sha(self) -> str | None:
        """The commit HEAD names, or None on an unborn branch."""
        result = self.run("rev-parse", "--verify", "-q", "HEAD^{commit}")
        return result.stdout if result.ok else None

    def symbolic_head(self) -> str | None:
        """The full ref HEAD is on (``refs/heads/...``), or None when detached."""
        result = self.run("symbolic-ref", "-q", "HEAD")
        return result.stdout if result.ok else None

    def ref_sha(self, ref: str) -> str | None:
        """The commit a ref points at, or None when it does not exist."""
        result = self.run("rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
        return result.stdout if result.ok else None

    def is_ancestor(self, older: str, newer: str) -> bool:
        """Whether ``older`` is reachable from ``newer`` (git proves it, or it is not)."""
        return self.run("merge-base", "--is-ancestor", older, newer).ok

    def uncommitted(self) -> str | None:
        """Why this working tree is not clean (a change, or an untracked file; ignored files do not
        count), or None when it is clean. A git that fails says so (its stderr, cut)."""
        status = self.run("status", "--porcelain", "--untracked-files=all")
        if not status.ok:
            return self.quote(status.stderr)
        return "it has uncommitted changes" if status.stdout else None

    def tracked_changes(self) -> bool:
        """Whether the index or a tracked file differs from HEAD (untracked files do not count)."""
        return bool(self.read("status", "--porcelain", "--untracked-files=no"))

    def operation_in_progress(self) -> str | None:
        """The name of a merge, rebase, cherry-pick or revert left in progress, or None."""
        markers = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "rebase-apply")
        paths = self.read("rev-parse", *(arg for marker in markers for arg in ("--git-path", marker)))
        for marker, name in zip(markers, paths.splitlines(), strict=True):
            if (self.cwd / name).exists():  # relative to cwd, or absolute (a linked worktree's)
                return marker
        return None
