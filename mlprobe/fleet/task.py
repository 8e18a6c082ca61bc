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
            prefetch(["mlprobe-opencl.json"])
    doc = build_report(host, ReportOptions(verify=verify), source=host_source(host, args))
    return {"report": doc, "seconds": round(time.monotonic() - started, 3), "mlprobe_version": __version__,
            "pid": os.getpid()}
