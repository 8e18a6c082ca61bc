"""What runs on each fleet node (a Ray task, or anything else that can call a function there): the
same report builder as `mlprobe report`, on that node's live machine or, when the node was started
with MLPROBE_REPLAY=DIR, on that capture bundle. Imports nothing of Ray."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Dict


def scan_node(verify: bool = False) -> Dict[str, Any]:
    """The node's redacted report (scan + plan, verify on request), and how long it took."""
    started = time.monotonic()
    from .. import __version__, ui
    from ..commands.common import host_source, make_host
    from ..pipeline import build_report
    from ..report.envelope import ReportOptions

    ui.set_level(ui.QUIET)  # nobody reads a worker's stderr; the report says what a note would
    args = argparse.Namespace(replay=None)
    host = make_host(args)
    if host.kind == "live":
        prefetch = getattr(host, "prefetch", None)
        if callable(prefetch):
            from ..scan.capture import PREFETCH

            prefetch(PREFETCH)
    doc = build_report(host, ReportOptions(verify=verify), source=host_source(host, args)).to_json()
    return {"report": doc, "seconds": round(time.monotonic() - started, 3), "mlprobe_version": __version__,
            "pid": os.getpid()}


class NodeAgent:
    """A scan worker that stays on its node between fleet scans (`fleet scan --keep-agents S`), so a
    repeat scan skips Ray's start of a new worker process per node (most of a cold scan's cost). It
    runs the same scan_node, with the live machine read afresh each time (tools and files are read
    again; only static tables stay loaded), and ends itself once idle for its keep time."""

    def __init__(self, keep_s: float) -> None:
        import threading

        self.keep_s = float(keep_s)
        self.last_used = time.monotonic()
        self.busy = False
        self.scans = 0
        threading.Thread(target=self._expire, name="mlprobe-agent-expiry", daemon=True).start()

    def _expire(self) -> None:
        while True:
            time.sleep(min(5.0, max(0.2, self.keep_s / 4)))
            if not self.busy and time.monotonic() - self.last_used > self.keep_s:
                os._exit(0)  # detached actor without restarts: its name is free again

    def scan(self, verify: bool = False, keep_s: float = 0.0) -> Dict[str, Any]:
        self.busy = True
        try:
            if keep_s > 0:
                self.keep_s = float(keep_s)
            result = scan_node(verify)
            self.scans += 1
            result["agent"] = {"scans": self.scans, "pid": os.getpid()}
            return result
        finally:
            self.last_used = time.monotonic()
            self.busy = False
