"""The SIGKILL test's child: launch the engine on ``URL``, then ``start`` the guarded workflow (it
blocks in its paid step until killed) or ``recover`` (print the recovered workflow's result).

Usage: python -m tests.unit.pipelines.engine_child URL FOLDER start|recover
"""

from __future__ import annotations

import sys

import anyio

from octipusd.durable.engine import DurableEngine
from tests.unit.pipelines import engine_workflows as flows

WORKFLOW_ID = "pipeline-kill.g1"


async def main(url: str, folder: str, phase: str) -> None:
    engine = DurableEngine(url, workflows=flows.ALL)
    flows.ENGINE.append(engine)
    await engine.ensure_started()
    try:
        if phase == "start":
            await engine.start_workflow(flows.GUARDED, WORKFLOW_ID, folder)
            await anyio.sleep_forever()
        else:  # the launch recovered the workflow; the same id answers its execution
            run = await engine.start_workflow(flows.GUARDED, WORKFLOW_ID, folder)
            with anyio.fail_after(60):
                print(await run.result(), flush=True)
    finally:
        await engine.shutdown()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
