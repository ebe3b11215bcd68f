"""Tool-action journal and recovery (seeds 000, 001, 004); not built yet, see the open issue on the journal."""
