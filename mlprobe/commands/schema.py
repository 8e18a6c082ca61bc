"""`mlprobe schema [KIND]`: print the JSON Schema of a document mlprobe writes. Every document carries
`"schema": "mlprobe.<kind>/<n>"`, and its schema's `$id` is that same value."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Dict

KINDS = ("scan", "plan", "install", "bundle", "verify", "doctor", "report", "diff", "fleet", "recipe")


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of a document mlprobe writes (default: scan)")
    p.add_argument("which", nargs="?", choices=KINDS, default="scan", metavar="KIND",
                   help="scan (`mlprobe scan --json`, the default), plan, install, bundle, verify, doctor, "
                        "report, diff, fleet (`fleet scan|merge`) or recipe (a recipe file): "
                        "one of " + ", ".join(KINDS))
    p.set_defaults(func=run)


def schema_of(which: str) -> Dict[str, Any]:
    """The published JSON Schema of one kind of document."""
    from ..model.docversion import with_id

    def scan() -> Dict[str, Any]:
        from ..schema import scan_schema
        return scan_schema()

    def report() -> Dict[str, Any]:
        from ..report.envelope import report_schema
        return dict(report_schema())

    def plan() -> Dict[str, Any]:
        from ..model.plan import plan_schema
        return plan_schema()

    def verify() -> Dict[str, Any]:
        from ..verify.schema import VERIFY_SCHEMA
        return with_id(VERIFY_SCHEMA, "verify")

    def doctor() -> Dict[str, Any]:
        from ..model.doctor import doctor_schema
        return doctor_schema()

    def fleet() -> Dict[str, Any]:
        from ..fleet.document import fleet_schema
        return dict(fleet_schema())

    def install() -> Dict[str, Any]:
        from ..model.docschemas import INSTALL_SCHEMA
        return INSTALL_SCHEMA

    def bundle() -> Dict[str, Any]:
        from ..model.docschemas import BUNDLE_SCHEMA
        return BUNDLE_SCHEMA

    def diff() -> Dict[str, Any]:
        from ..model.docschemas import DIFF_SCHEMA
        return DIFF_SCHEMA

    def recipe() -> Dict[str, Any]:
        from ..recipes import recipe_schema
        return dict(recipe_schema())

    makers: Dict[str, Callable[[], Dict[str, Any]]] = {
        "scan": scan, "report": report, "plan": plan, "verify": verify, "doctor": doctor, "fleet": fleet,
        "install": install, "bundle": bundle, "diff": diff, "recipe": recipe}
    return makers[which]()


def run(args: argparse.Namespace) -> int:
    if args.which == "scan":
        from ..schema import schema_text

        sys.stdout.write(schema_text())
        return 0
    sys.stdout.write(json.dumps(schema_of(args.which), indent=2) + "\n")
    return 0
