"""Monitors (FACTS.md §7, issue 28 item 7): watch a read-only tool, an event of the owner's session
or a time, and wake the owner's session once.

* :mod:`~octipusd.monitors.conditions` -- the condition ``{path, operator, value}`` judged on a read;
* :mod:`~octipusd.monitors.spec` -- the limits and ``monitor__create``'s checked arguments;
* :mod:`~octipusd.monitors.probes` -- the probe-able tools, run as the monitor's owner;
* :mod:`~octipusd.monitors.watch` -- the durable workflow (on :mod:`octipusd.durable`) and its steps;
* :mod:`~octipusd.monitors.delivery` -- the wake-up: steering the busy root, else an unattended turn;
* :mod:`~octipusd.monitors.service` -- :class:`MonitorService`, what every surface calls.
"""
