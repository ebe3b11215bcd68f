"""Pipeline runner, checkpoints, attempts and gate commands (seed 003); not built yet."""
