"""Pipelines (seed 003 "Executable paths and pipeline recovery", FACTS.md §6): staged, checkpointed
work larger than a turn, run on the durable engine (:mod:`octipusd.durable`).

* :mod:`~octipusd.pipelines.templates`, :mod:`~octipusd.pipelines.prompts`,
  :mod:`~octipusd.pipelines.presets`, :mod:`~octipusd.pipelines.template_service` -- templates: their
  fields, validation, prompt variables, lookup, export and the presets;
* :mod:`~octipusd.pipelines.graph` -- a template compiled to nodes and edges, and the rule that walks it;
* :mod:`~octipusd.pipelines.evidence` -- the evidence gates of a stage;
* :mod:`~octipusd.pipelines.service` -- the use cases the API, the page, the TUI and the bridge tools
  call; :mod:`~octipusd.pipelines.status` -- the status document;
* :mod:`~octipusd.pipelines.replay` -- the replay review a resume or rewind asks for (seed 000).

The public record (pipeline, items, nodes, attempts, history) is in Octipus's store
(``octipusd.store.pipeline_store``); the engine keeps where each workflow is.
"""
