"""`mlprobe report`: one redacted, versioned file for a bug ticket (scan + plan, verify on request,
the raw captures on request), as JSON or as Markdown for a GitHub issue."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import ui
from ..errors import EXIT_USAGE, MlprobeError
from ..model import jsondoc
from .common import add_replay, host_source, make_host, refuse_overwriting_an_input, replay_inputs


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "report",
        help="a redacted report for a bug ticket (scan + plan; JSON or Markdown)",
        description="Scan (and plan, and with --verify verify) this machine and write one versioned "
        "report. Host and user names, home paths, addresses, GPU UUIDs, serial numbers, "
        "machine ids and secret-looking values are redacted unless --no-redact.",
    )
    add_replay(p)
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    p.add_argument(
        "--format",
        choices=("json", "markdown"),
        default=None,
        help="json (default; markdown when FILE ends in .md)",
    )
    p.add_argument("--verify", action="store_true", help="also run verify and include its verdicts")
    p.add_argument("--python", metavar="PATH",
                   help="the path of an interpreter: verify the frameworks of this interpreter (e.g. a venv's bin/python that "
                        "`mlprobe install` made) and include the verdicts; implies --verify")
    p.add_argument(
        "--include-raw",
        action="store_true",
        help="embed the (redacted) raw captures, so `mlprobe scan --replay FILE` replays them",
    )
    p.add_argument(
        "--no-redact",
        action="store_true",
        help="keep host/user names, paths, ids and secrets (never post such a report publicly)",
    )
    p.set_defaults(func=run)


def _output_error(path: Path, why: str) -> MlprobeError:
    return MlprobeError(
        f"cannot write the report to {path}", why=why,
        next_step="pass -o with a file in a folder that exists and that you can write to, "
                  "or leave out -o to print the report",
        ref="E801", exit_code=EXIT_USAGE,
    )


def _check_output(path: Path) -> None:
    """Refuse a path that cannot be written before the scan, not after it."""
    if path.is_dir():
        raise _output_error(path, "it is a folder")
    parent = path.parent
    if not parent.is_dir():
        raise _output_error(path, f"the folder {parent} does not exist")


def run(args: argparse.Namespace) -> int:
    from ..pipeline import build_report
    from ..report.envelope import ReportOptions
    from ..report.markdown import render_markdown

    if args.output:
        _check_output(Path(args.output))
        refuse_overwriting_an_input(args.output, replay_inputs(args))
    python = None
    if args.python:
        if args.replay:
            raise MlprobeError("--python verifies an interpreter on this machine; it cannot go with --replay",
                               next_step="leave out --replay, or leave out --python", ref="E802",
                               exit_code=EXIT_USAGE)
        from ..verify.runner import resolve_python

        python = resolve_python(args.python)  # a usage error now, not after the scan
    fmt = args.format or (
        "markdown" if args.output and args.output.lower().endswith((".md", ".markdown")) else "json"
    )
    host = make_host(args)
    if host.kind == "live":
        from ..doctor.enumerate import install_producer
        from ..scan.capture import PREFETCH
        from ..scan.host import shared_live_host

        install_producer()  # doctor's findings read the frameworks' own enumeration
        from .doctor import DOCTOR_PREFETCH

        shared_live_host().prefetch(PREFETCH + DOCTOR_PREFETCH)  # doctor's part, beside the scan
    options = ReportOptions(verify=args.verify or bool(python), include_raw=args.include_raw,
                            redact=not args.no_redact, python=python)
    with ui.progress("report: scanning, planning" + (", verifying" if options.verify else "")):
        report = build_report(host, options, source=host_source(host, args))
    text = render_markdown(report) if fmt == "markdown" else \
        ui.json_safe(jsondoc.dumps(report.to_json(), indent=2, ensure_ascii=False)) + "\n"
    if args.no_redact:
        print(
            "WARNING: this report is NOT redacted (--no-redact): it may hold host and user names, "
            "paths, IP/MAC addresses, serial numbers and secrets. Do not post it publicly.",
            file=sys.stderr,
        )
    if args.output:
        try:
            ui.write_file(args.output, text)
        except OSError as exc:
            raise _output_error(Path(args.output), exc.strerror or str(exc)) from None
        red = report.redactions
        what = ", ".join(f"{k} x{v.occurrences}" for k, v in (red.kinds or {}).items()) or "nothing found to redact"
        ui.note(
            f"wrote {ui.display_path(args.output)} ({fmt}; "
            + (f"redacted: {what}" if red.enabled else "NOT redacted")
            + ")"
        )
        if args.include_raw and fmt == "json":
            ui.note(f"replay it with: mlprobe scan --replay {ui.display_path(args.output)}")
    else:
        sys.stdout.write(text)
    return 0
