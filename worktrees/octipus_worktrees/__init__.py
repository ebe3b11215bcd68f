"""Git worktree per coding child (seed 003, GitPython); not built yet."""
