"""The web page client of octipusd (not built yet: octipusctl is the client today)."""
