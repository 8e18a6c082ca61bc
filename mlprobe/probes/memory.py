"""Memory: total and available (psutil, captured into host.json)."""

from __future__ import annotations

from ..model.facts import Contribution, MemoryFacts
from ..scan.capture import Host


def probe(host: Host) -> Contribution:
    info = host.info()
    out = Contribution()
    total = info.get("memory_total")
    avail = info.get("memory_available")
    if not isinstance(total, int):
        out.status = "absent"
        out.error = "memory is not in this capture" if host.kind == "replay" else "psutil is not available"
        return out
    out.memory = MemoryFacts(total_bytes=total, available_bytes=avail if isinstance(avail, int) else None)
    return out
