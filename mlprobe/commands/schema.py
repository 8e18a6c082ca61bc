"""`mlprobe schema`: print the JSON Schema of the scan report."""

from __future__ import annotations

import argparse
import sys


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of `mlprobe scan --json`")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..schema import schema_text

    sys.stdout.write(schema_text())
    return 0
