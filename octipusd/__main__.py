"""``python -m octipusd`` / the ``octipusd`` console script."""

from __future__ import annotations

import sys

from octipusd.app import main as _main


def main() -> None:
    """Run the daemon and exit with its code."""
    sys.exit(_main())


if __name__ == "__main__":
    main()
