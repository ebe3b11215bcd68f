"""Octipus offline test kit: scripted model servers and stub CLIs.

Nothing here needs a vendor account or the network; everything listens on 127.0.0.1 only.

- :mod:`octipusd.testing.anthropic_server`: a scripted Anthropic Messages API server that the real
  Claude Code CLI talks to through ``ANTHROPIC_BASE_URL`` (``ScriptedAnthropicServer`` in Python, or
  ``python -m octipusd.testing.anthropic_server --script FILE``). Only the model's choices are
  scripted; the CLI, its tools, MCP and the permission relay run for real.
- :mod:`octipusd.testing.script`: the script file format (model turns as JSON) and its parser.
- :mod:`octipusd.testing.stub_cli`: a stand-in vendor CLI driven by a JSON action list
  (``OCTIPUS_STUB_SCRIPT``), for framing and fault situations the real binaries cannot produce on
  demand (huge lines, garbage lines, crashes, leftover grandchildren).
- ``octipusd/testing/scripts/``: example scripts; ``demo.json`` is the README demo.

Protocol facts come from ``/work/shared/protocols/observed.md`` §1 (Claude Code 2.1.197).
"""
