"""py-cpuinfo on this machine, as the `py-cpuinfo.json` capture the CPU probe parses (so a replay
sees what the live call found)."""

from __future__ import annotations

import json

from ..capture import Capture, CaptureSpec


def live_cpuinfo(s: CaptureSpec) -> Capture:
    try:
        import cpuinfo  # type: ignore[import-untyped]

        data = cpuinfo.get_cpu_info()
    except Exception as exc:  # py-cpuinfo missing or failing: no capture, the probe says so
        return Capture(s.name, "error", error=f"py-cpuinfo failed: {type(exc).__name__}: {exc}")
    return Capture(s.name, "ok", data=json.dumps(data, indent=2, sort_keys=True, default=str).encode())
