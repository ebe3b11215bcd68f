"""The shell sandbox (``security.shellSandbox``; issue 17 item 5, FACTS.md §4).

Octipus's own shell commands (``shell__run``, a child's gate commands and the worktree setup
command) run inside bubblewrap, else firejail, when the setting asks for it:

* :class:`~octipusd.sandbox.runners.RunnerSearch` finds the runner once per daemon (only in
  ``/usr/bin``, ``/usr/local/bin`` and ``/bin``), probes it, and describes the result as a
  :class:`~octipusd.toolkit.ShellSandbox` (health shows it);
* :func:`~octipusd.sandbox.hidden.daemon_hidden_paths` lists what commands must not reach (the
  daemon's own files, the user's runtime folder, the host's buses);
* :func:`~octipusd.sandbox.argv.confine` builds the argv of one command from the
  :class:`~octipusd.toolkit.ShellTerms` its host gives (the sandbox and the run's host services).
"""

from __future__ import annotations

from octipusd.sandbox.argv import (
    SANDBOX_TMPDIR,
    bwrap_argv,
    confine,
    firejail_argv,
    masked_paths,
    passed_sockets,
)
from octipusd.sandbox.hidden import (
    HOST_BUSES,
    RUNTIME_DOCKER_SOCKETS,
    RUNTIME_SOCKETS,
    daemon_hidden_paths,
    docker_sockets,
)
from octipusd.sandbox.runners import PROBE_TIMEOUT_SECONDS, RUNNER_DIRS, RunnerSearch

__all__ = [
    "HOST_BUSES",
    "PROBE_TIMEOUT_SECONDS",
    "RUNNER_DIRS",
    "RUNTIME_DOCKER_SOCKETS",
    "RUNTIME_SOCKETS",
    "SANDBOX_TMPDIR",
    "RunnerSearch",
    "bwrap_argv",
    "confine",
    "daemon_hidden_paths",
    "docker_sockets",
    "firejail_argv",
    "masked_paths",
    "passed_sockets",
]
