"""`mlprobe schema [scan|plan|verify|doctor|report|recipe|fleet]`: print a JSON Schema mlprobe publishes."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of `mlprobe scan --json` (or of a report)")
    p.add_argument("which", nargs="?", choices=("scan", "plan", "verify", "doctor", "report", "recipe", "fleet"),
                   default="scan",
                   help="scan: `mlprobe scan --json` (default); plan: `mlprobe plan --json`; verify: "
                        "`mlprobe verify --json`; doctor: `mlprobe doctor --json`; report: `mlprobe report`; recipe: a recipe file; fleet: "
                        "`mlprobe fleet scan|merge`")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.which == "scan":
        from ..schema import schema_text

        sys.stdout.write(schema_text())
        return 0
    if args.which == "report":
        from ..report.envelope import report_schema

        doc = report_schema()
    elif args.which == "plan":
        from ..model.plan import plan_schema

        doc = plan_schema()
    elif args.which == "verify":
        from ..verify.schema import VERIFY_SCHEMA

        doc = VERIFY_SCHEMA
    elif args.which == "doctor":
        from ..model.doctor import doctor_schema

        doc = doctor_schema()
    elif args.which == "fleet":
        from ..fleet.document import fleet_schema

        doc = fleet_schema()
    else:
        from ..recipes import recipe_schema

        doc = recipe_schema()
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    return 0
