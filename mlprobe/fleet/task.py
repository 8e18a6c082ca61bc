"""What runs on each fleet node (a Ray task, or anything else that can call a function there): the
same report as `mlprobe report` (pipeline.node_report), on that node's live machine or, when the node
was started with MLPROBE_REPLAY=DIR, on that capture bundle. Imports nothing of Ray. Its answer is the
JSON that crosses back to the driver (ray_scan.accept reads it)."""

from __future__ import annotations

import os
import time

from ..model.jsontypes import JsonObject


def scan_node(verify: bool = False) -> JsonObject:
    """The node's redacted report (scan + plan, verify on request), and how long it took."""
    started = time.monotonic()
    from .. import __version__, ui
    from ..commands.common import REPLAY_ENV
    from ..errors import StageError
    from ..pipeline import node_report
    from ..scan.capture import BundleError

    ui.set_level(ui.QUIET)  # nobody reads a worker's stderr; the report says what a note would
    replay = os.environ.get(REPLAY_ENV) or None
    try:
        report = node_report(replay, verify=verify, via=REPLAY_ENV)
    except BundleError as exc:  # the node's error, as `mlprobe report` words it for MLPROBE_REPLAY
        raise StageError(f"cannot replay {ui.display_path(replay or '')} (from {REPLAY_ENV})", why=str(exc),
                         next_step=f"unset {REPLAY_ENV} on the node, or name a capture bundle there",
                         ref="E101", kind="usage") from None
    return {"report": report.to_json(), "seconds": round(time.monotonic() - started, 3),
            "mlprobe_version": __version__, "pid": os.getpid()}


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

    def scan(self, verify: bool = False, keep_s: float = 0.0) -> JsonObject:
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
