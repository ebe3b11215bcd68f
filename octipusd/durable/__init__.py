"""The durable execution engine (DBOS Transact) inside the daemon, for work larger than a turn:
pipelines, monitors and schedules (DESIGN.md "Durable work").

* :mod:`~octipusd.durable.engine` -- :class:`~octipusd.durable.engine.DurableEngine`, the lifecycle
  and thin typed wrappers (workflows, steps, messages, events, the restart guard);
* :mod:`~octipusd.durable.setup` -- the system database, its migration, DBOS's configuration and the
  registry of workflow functions.

Only this room imports ``dbos``; it imports nothing of Octipus but the foundations.
"""
