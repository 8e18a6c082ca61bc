"""Scan: captures (live or replayed) -> probes -> merged facts. `run.scan(host)` is the entry."""
