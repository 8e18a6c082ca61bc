"""`mlprobe scan`: CPU, GPUs/accelerators, runtimes, frameworks. Table, or --json."""

from __future__ import annotations

import argparse
import time

from .common import add_replay, host_source, make_host, print_json, scan_host


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("scan", help="what this machine has (CPU, GPUs, runtimes, frameworks)")
    add_replay(p)
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..pipeline import scan_report

    host = make_host(args)
    report = scan_report(host, host_source(host, args), scanner=scan_host)
    scanned = time.perf_counter()
    if args.json:
        print_json(report.to_json())
    else:
        from ..render.terminal import render_scan

        render_scan(report, report.to_json())
    _timeline(scanned)
    return 0


def _timeline(scanned: float) -> None:
    """With --verbose, a live scan says when its slowest part (the OpenCL child) started and ended,
    when the probes were done and when the output was written, from mlprobe's start."""
    from .. import ui
    from ..scan.live import _early

    if not ui.verbose() or not _early.started_at:
        return
    t0 = _early.T0

    def at(t: float) -> str:
        return f"+{t - t0:.3f} s" if t else "-"
    ui.debug(f"timeline: OpenCL child started {at(_early.started_at)}, read {at(_early.ended_at)}; "
             f"probes done {at(scanned)}; output written {at(time.perf_counter())}")
