"""Command line: `mlprobe scan|capture|schema|plan|install|verify|report|diff`.

Each command lives in mlprobe/commands/<name>.py with `register(subparsers)`; the parser it adds
sets `func(args) -> int`. Command modules import their heavy parts inside `func`, so that
`mlprobe scan --json` stays fast.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, List, Optional

from . import __version__

if TYPE_CHECKING:
    import argparse

COMMANDS = ["scan", "capture", "schema", "plan", "install", "verify", "report", "diff"]


def build_parser() -> "argparse.ArgumentParser":
    import argparse
    import importlib
    import importlib.util

    parser = argparse.ArgumentParser(
        prog="mlprobe",
        description="Which deep-learning stack can really use this hardware, how to get it, "
        "and does it actually go faster?",
    )
    parser.add_argument("--version", action="version", version=f"mlprobe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        modname = f"mlprobe.commands.{name}"
        if importlib.util.find_spec(modname) is None:
            continue
        importlib.import_module(modname).register(sub)
    return parser


def _early_prefetch(argv: List[str]) -> None:
    """`mlprobe scan` on this machine: start the OpenCL child process before anything else is
    imported, since enumerating OpenCL is the slowest capture and everything else hides behind it."""
    if len(argv) >= 1 and argv[0] == "scan" and not any(a.startswith("--replay") for a in argv):
        from ._early import start_opencl_child

        start_opencl_child()


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _early_prefetch(argv)
    from .errors import EXIT_INTERRUPTED, EXIT_USAGE, MlprobeError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except MlprobeError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # A file the command had to read or write (the commands check their paths first; this is the
        # net for a disk that fills up or a permission that changes under them).
        where = f" ({exc.filename})" if exc.filename else ""
        err = MlprobeError(
            f"{exc.strerror or exc}{where}",
            next_step="check that the path exists, that you may read or write it, and that the disk has room",
            ref="E001",
        )
        print(err.render(), file=sys.stderr)
        return err.exit_code
