"""Summary lines the fuzz tests leave for the end of the pytest run (the lead quotes them)."""

LINES: list[str] = []
