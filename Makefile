# The README's two commands. Logic lives in scripts/ and Python, not here.
PY := .venv/bin/python

.PHONY: demo test bootstrap lint bench

demo: bootstrap            ## the main job: octipusd + a real two-turn Claude Code run against the scripted model
	scripts/netns $(PY) -m octipusd.testing.demo

test: bootstrap            ## everything CI runs: lint, types, the whole test suite (PostgreSQL included)
	bash scripts/install-test-deps.sh
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
	scripts/netns $(PY) -m pytest

bootstrap:
	bash scripts/bootstrap.sh

bench: bootstrap           ## benchmarks: ratios against baselines measured in the same run
	scripts/netns $(PY) bench/bench_turn.py
	scripts/netns $(PY) bench/bench_bridge.py
	scripts/netns $(PY) bench/bench_gate.py
	scripts/netns $(PY) bench/bench_journal.py
	scripts/netns $(PY) bench/bench_reuse.py
