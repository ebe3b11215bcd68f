"""Credentials and {{secret:NAME}} placeholders (seed 003); not built yet."""
