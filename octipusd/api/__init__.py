"""The versioned HTTP API on the Unix socket (`app`, `models`, `server`)."""
