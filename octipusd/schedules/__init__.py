"""Schedules (issue 28 item 8): unattended turns and pipeline runs at the slots of a cron expression,
each slot fired once, across restarts, on the durable engine's timers.

* :mod:`~octipusd.schedules.service` -- :class:`~octipusd.schedules.service.ScheduleService`, the use
  cases the API, ``octipusctl`` and the page call (add, list, show, pause, resume, remove) and the
  start-up's catch-up of a missed slot;
* :mod:`~octipusd.schedules.firing` -- the workflow of one slot and the firer that starts its work.
"""
