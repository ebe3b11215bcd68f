"""``schedules``: cron schedules of unattended turns and pipeline runs (issue 28 item 8).

::

    [schedules]
    catchUpMissed = true     # env OCTIPUS_SCHEDULES__CATCHUPMISSED: at start-up, fire once the latest slot
                             # of each active schedule missed while octipusd was down

This module holds only the model; :mod:`octipusd.settings` mounts it as ``Settings.schedules``.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict

__all__ = ["SCHEDULES_ACCEPTED", "SchedulesSettings"]

#: What each key accepts, for error messages.
SCHEDULES_ACCEPTED: Final[dict[str, str]] = {
    "schedules.catchUpMissed": "true or false (default true)",
}


class SchedulesSettings(BaseModel):
    """``schedules``.

    Attributes:
        catchUpMissed: At start-up, fire the latest slot each active schedule missed while the daemon
            was down, once (the earlier missed slots never fire); false: missed slots never fire.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    catchUpMissed: bool = True
