"""Helpers shared by commands: choosing a host (live or replay) and printing JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, Optional

from ..errors import EXIT_USAGE, MlprobeError
from ..host import BundleError, Host, open_replay, shared_live_host


def add_replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replay", metavar="DIR",
                   help="read a capture bundle (folder, or a report made with --include-raw) "
                        "instead of this machine")


def make_host(args: argparse.Namespace) -> Host:
    replay = getattr(args, "replay", None)
    if replay:
        try:
            return open_replay(replay)
        except BundleError as exc:
            raise MlprobeError(
                f"cannot replay {replay}", why=str(exc),
                next_step="pass a folder written by `mlprobe capture DIR`, a fixture folder, or a "
                          "report made with `mlprobe report --include-raw`",
                ref="E101", exit_code=EXIT_USAGE,
            ) from None
    return shared_live_host()


def host_source(host: Host, args: argparse.Namespace) -> Dict[str, Any]:
    if host.kind == "replay":
        return {"kind": "replay", "bundle": str(getattr(args, "replay", ""))}
    return {"kind": "live"}


def print_json(doc: Any, stream: Optional[Any] = None) -> None:
    out = stream or sys.stdout
    out.write(json.dumps(doc, indent=2, sort_keys=False))
    out.write("\n")
