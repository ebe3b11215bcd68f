"""An unruly vendor CLI for containment and stop tests: ``python stub_unruly.py MODE PID_FILE``.

Modes (each prints JSON lines on stdout):

``escape``
    Starts a grandchild that leaves the session and clears its environment
    (``sh -c 'setsid env -i sleep 1000 & echo $! > PID_FILE'``; the ``sh`` exits at once, so the
    grandchild is an orphan with neither the process group nor the run marker), prints
    ``{"type": "ready"}`` and waits.
``hold``
    Starts a background ``sleep 1000`` that inherits stdout and stderr (its pid in PID_FILE),
    prints a ``result`` line and exits 0.
``deaf``
    Ignores SIGTERM and stdin EOF and prints ``{"type": "tick", "n": N}`` every 20 ms, then a
    late ``result`` every 10 ticks, until killed (its own pid in PID_FILE).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def _say(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _wait_for_sleep(pid_file: str) -> None:
    """Until the pid in ``pid_file`` runs ``sleep`` (past ``setsid`` and ``env -i``)."""
    for _ in range(500):
        try:
            with open(pid_file) as fh, open(f"/proc/{int(fh.read())}/cmdline", "rb") as cmd:
                if cmd.read().startswith(b"sleep\0"):
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.01)


def main(mode: str, pid_file: str) -> int:
    """Run one mode (see the module docstring)."""
    if mode == "escape":
        subprocess.run(
            ["/bin/sh", "-c", f"setsid env -i sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > {pid_file}"]
        )
        _wait_for_sleep(pid_file)
        _say({"type": "ready"})
        signal.pause()
    elif mode == "hold":
        child = subprocess.Popen(["sleep", "1000"])  # inherits stdout and stderr
        with open(pid_file, "w") as fh:
            fh.write(str(child.pid))
        _say({"type": "result", "subtype": "success", "result": "done"})
        os._exit(0)
    elif mode == "deaf":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(pid_file, "w") as fh:
            fh.write(str(os.getpid()))
        n = 0
        while True:
            n += 1
            _say({"type": "tick", "n": n})
            if n % 10 == 0:
                _say({"type": "result", "subtype": "success", "result": f"late answer {n}"})
            time.sleep(0.02)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
