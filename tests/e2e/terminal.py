"""The real octipusctl on a pseudo-terminal: what a person at a terminal types and sees."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import sys
import termios
from collections.abc import Mapping, Sequence
from pathlib import Path

CTL = str(Path(sys.executable).parent / "octipusctl")
#: Seconds the terminal may stay silent before the test gives up.
SILENCE_S = 60.0


def on_terminal(
    args: Sequence[str], env: Mapping[str, str], answers: Sequence[tuple[str, str]] = ()
) -> tuple[int, bytes]:
    """Run octipusctl on a new pseudo-terminal (its controlling terminal, so getpass hides what is
    typed); type each answer once its prompt ends the last line shown.

    Args:
        args: octipusctl's arguments.
        env: Its environment.
        answers: ``(prompt, answer)`` pairs in order: ``answer`` and a newline are typed once the
            text after the last newline shown holds ``prompt``.

    Returns:
        The exit code, and every byte it showed (a newline added after each answer typed).
    """
    master, slave = pty.openpty()

    def take_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    process = subprocess.Popen(
        [CTL, *args],
        env=dict(env),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=take_terminal,
    )
    os.close(slave)
    shown = b""
    try:
        for prompt, answer in answers:
            while prompt.encode() not in shown.rsplit(b"\n", 1)[-1]:
                ready, _, _ = select.select([master], [], [], SILENCE_S)
                assert ready, shown
                shown += os.read(master, 4096)
            os.write(master, answer.encode() + b"\n")
            shown += b"\n"
        while True:
            ready, _, _ = select.select([master], [], [], SILENCE_S)
            try:
                chunk = os.read(master, 4096) if ready else b""
            except OSError:  # the terminal closed: octipusctl exited
                chunk = b""
            if not chunk:
                break
            shown += chunk
        return process.wait(timeout=SILENCE_S), shown
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
