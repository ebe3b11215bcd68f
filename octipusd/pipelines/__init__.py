"""Pipelines (seed 003): so far the replay review a resume or rewind asks for (:mod:`~octipusd.pipelines.replay`); the runner, checkpoints, attempts and gate commands are not built yet."""
