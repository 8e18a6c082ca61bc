"""`mlprobe scan`: CPU, GPUs/accelerators, runtimes, frameworks. Table, or --json."""

from __future__ import annotations

import argparse

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
    if args.json:
        print_json(report.to_json())
    else:
        from ..render.terminal import render_scan

        render_scan(report, report.to_json())
    return 0
