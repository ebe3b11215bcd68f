# The README's two commands. Logic lives in scripts/ and Python, not here.
PY := .venv/bin/python
# pytest-xdist workers for `make test`: the tests mostly wait on subprocesses (daemons, vendor CLIs,
# model servers), so 4 workers beat 2 on a 2-core machine; 0 runs the suite in one process. Tests
# marked `serial` (timing-sensitive under CPU contention) run after them, in one process.
TEST_WORKERS ?= 4

.PHONY: demo demo-pipeline test bootstrap lint bench

demo: bootstrap            ## the main job: octipusd + a real two-turn Claude Code run against the scripted model
	scripts/netns $(PY) -m octipusd.testing.demo

demo-pipeline: bootstrap   ## the preset pipeline plan-implement-verify end to end: real Claude Code against the scripted model
	scripts/netns $(PY) -m octipusd.testing.demo_pipeline

test: bootstrap            ## everything CI runs: lint, types, the whole test suite (PostgreSQL included)
	bash scripts/install-test-deps.sh
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
	scripts/netns $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not serial"
	scripts/netns $(PY) -m pytest -m serial

bootstrap:
	bash scripts/bootstrap.sh

bench: bootstrap           ## benchmarks against baselines of the same run; one table at the end (BENCH_ARGS=--quick)
	scripts/netns $(PY) bench/run_all.py $(BENCH_ARGS)
