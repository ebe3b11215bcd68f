"""Benchmark: what session reuse saves in what a follow-up turn sends (seed 003 "What resume
actually saves").

On a real SQLite store, a session of ``--turns`` turns (each prompt and answer about
``--chars`` characters) is built; then, for the next turn, the launch prompt is composed three
ways through the runtime's own code (:func:`octipusd.runtime.transcript.render_launch_prompt`
fed by the store's transcript queries):

* **resumed**: the vendor record's cursor is at the last answer, so only the turn's text goes;
* **cold**: no vendor session, so every earlier message is carried;
* **cold after compaction**: a checkpoint (the built-in extractive summary, keeping 2 turns)
  plus the messages after it.

Prints the bytes each sends, the median time to compose each (the store reads included), and
the ratios against the cold launch measured in the same run. Token savings depend on the
vendor's own cache; these are the bytes Octipus hands over.

Usage::

    .venv/bin/python bench/bench_reuse.py [--turns 40] [--chars 2000] [--repeat 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from summary import record

from octipusd.runtime.compaction import compact
from octipusd.runtime.transcript import LaunchPrompt, render_launch_prompt
from octipusd.store.repository import Store


def _timed(repeat: int, build: Callable[[], LaunchPrompt]) -> tuple[int, float]:
    times = []
    size = 0
    for _ in range(repeat):
        start = time.perf_counter()
        size = len(build().text.encode())
        times.append(time.perf_counter() - start)
    return size, statistics.median(times) * 1000


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{Path(tmp) / 'bench.db'}")
        try:
            session = store.create_session(workspace=tmp, adapter="claude-code")
            words = "lorem ipsum dolor sit amet consectetur "
            body = (words * (args.chars // len(words) + 1))[: args.chars]
            for turn in range(args.turns):
                store.append_message(session.id, role="user", text=f"question {turn}: {body}")
                store.append_message(
                    session.id, role="assistant", text=f"answer {turn}: {body}", adapter="claude-code"
                )
            prompt = "and now the next step"
            current = store.append_message(session.id, role="user", text=prompt)
            assert current is not None
            through = current.seq - 1

            def resumed() -> LaunchPrompt:
                unseen = store.list_messages(session.id, generation=0, after_seq=through, through_seq=through)
                return render_launch_prompt(prompt, unseen=unseen)

            def cold() -> LaunchPrompt:
                checkpoint = store.latest_checkpoint(session.id, 0)
                after = checkpoint.through_seq if checkpoint else 0
                unseen = store.list_messages(session.id, generation=0, after_seq=after, through_seq=through)
                return render_launch_prompt(prompt, unseen=unseen, checkpoint=checkpoint)

            resumed_bytes, resumed_ms = _timed(args.repeat, resumed)
            cold_bytes, cold_ms = _timed(args.repeat, cold)
            report = compact(store, session.id, keep_turns=2, root_keys=["claude-code"])
            assert report.published, report.reason
            compacted_bytes, compacted_ms = _timed(args.repeat, cold)
        finally:
            store.close()
    print(f"session: {args.turns} turns of ~{args.chars} characters per message")
    print(f"resumed launch:               {resumed_bytes:>9} bytes  {resumed_ms:7.2f} ms to compose")
    print(f"cold launch (baseline):       {cold_bytes:>9} bytes  {cold_ms:7.2f} ms to compose")
    print(f"cold launch after compaction: {compacted_bytes:>9} bytes  {compacted_ms:7.2f} ms to compose")
    print(f"ratio resumed/cold bytes:     {resumed_bytes / cold_bytes:.4f}")
    print(f"ratio compacted/cold bytes:   {compacted_bytes / cold_bytes:.4f}")
    # not a figure of issue 13's table: shown without a target
    record(f"follow-up turn bytes, resumed/cold ({args.turns} turns)", f"{resumed_bytes / cold_bytes:.4f}")
    record(
        f"follow-up turn bytes, compacted/cold ({args.turns} turns)", f"{compacted_bytes / cold_bytes:.4f}"
    )


if __name__ == "__main__":
    main()
