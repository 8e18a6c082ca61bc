"""`mlprobe diff A B`: what differs between two machines (reports, scan JSONs or capture bundles)."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, MlprobeError
from .common import print_json


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "diff",
        help="what differs between two machines (reports, scan JSONs or bundles)",
        description="Compare two machines, e.g. the one that works and the one that doesn't: OS, CPU "
        "flags and x86-64 level, GPUs (driver, compute capability, gfx target), runtimes, "
        "frameworks and their flavours, Python, and the plan's top pick per framework. "
        "Each side is an `mlprobe report` JSON, an `mlprobe scan --json` output, or a "
        "capture bundle folder. Exit status 0: no differences, 1: differences, 2: unreadable input.",
    )
    p.add_argument("a", metavar="A", help="report JSON, scan JSON or bundle folder")
    p.add_argument("b", metavar="B", help="report JSON, scan JSON or bundle folder")
    p.add_argument("--json", action="store_true", help="print the differences as one JSON object")
    p.set_defaults(func=run)


def _say_overrides_are_not_applied() -> None:
    """MLPROBE_OVERRIDE_* set here would make both machines alike in that fact: diff compares them as
    their reports and bundles hold them, and says so (each side's own overrides are shown as such)."""
    from .. import ui
    from ..scan.host import OVERRIDE_PREFIX

    for k in sorted(k for k in os.environ if k.startswith(OVERRIDE_PREFIX)):
        ui.note(f"{ui.safe_line(k)} from the environment is not applied by diff: it compares the two machines "
                "as their reports and bundles hold them")


def run(args: argparse.Namespace) -> int:
    from .. import ui
    from ..pipeline import diff_side
    from ..report.diff import DiffInputError, diff_document, diff_sides, render_table

    _say_overrides_are_not_applied()
    sides = []
    for path in (args.a, args.b):
        try:
            sides.append(diff_side(path))
        except DiffInputError as exc:
            raise MlprobeError(
                f"cannot compare {path}",
                why=str(exc),
                next_step="pass two files made by `mlprobe report` or `mlprobe scan --json`, or two "
                "folders made by `mlprobe capture`",
                ref="E701",
                exit_code=EXIT_USAGE,
            ) from None
    a, b = sides
    diffs = diff_sides(a, b)
    if args.json:
        print_json(diff_document(a, b, diffs))
    else:
        sys.stdout.write(render_table(a, b, diffs, ui.output_width()))
    return EXIT_FAILURE if diffs else EXIT_OK  # like diff(1): 1 when the machines differ
