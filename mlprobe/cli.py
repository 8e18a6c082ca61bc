"""Command line: `mlprobe scan|capture|schema|plan|install|verify|report|diff|fleet|labels`.

Each command lives in mlprobe/commands/<name>.py with `register(subparsers)`; the parser it adds
sets `func(args) -> int`. Command modules import their heavy parts inside `func`, so that
`mlprobe scan --json` stays fast.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, List, NoReturn, Optional

from . import __version__

if TYPE_CHECKING:
    import argparse

COMMANDS = ["scan", "capture", "schema", "plan", "install", "verify", "report", "diff", "fleet", "labels",
            "completion"]

EXIT_CODES_HELP = """exit codes:
  0    done (diff: no differences)
  1    a real failure found (verify: wrong results; install failed; diff: differences)
  2    usage error: bad arguments or unreadable input
  3    nothing usable (no recipe fits, no device to verify)
  130  interrupted (Ctrl-C)"""


class UsageError(Exception):
    """argparse's complaint about the command line (exit code 2), raised instead of exiting."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


def _parser_class() -> "type[argparse.ArgumentParser]":
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> "NoReturn":
            raise UsageError(message, self.format_usage())

    return Parser


def build_parser() -> "argparse.ArgumentParser":
    import argparse
    import importlib
    import importlib.util

    parser = _parser_class()(
        prog="mlprobe",
        description="Which deep-learning stack can really use this hardware, how to get it, "
        "and does it actually go faster?",
        epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"mlprobe {__version__}")
    _add_verbosity(parser, 1)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        modname = f"mlprobe.commands.{name}"
        if importlib.util.find_spec(modname) is None:
            continue
        importlib.import_module(modname).register(sub)
    for p in sub.choices.values():  # `mlprobe -q scan` and `mlprobe scan -q` both work
        _add_verbosity(p, argparse.SUPPRESS)
    return parser


def _add_verbosity(p: "argparse.ArgumentParser", default: object) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=0, default=default,
                   help="no progress and no side remarks on stderr (errors still)")
    g.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=2, default=default,
                   help="more detail on stderr (probe timings, what each step waits on)")


def _early_prefetch(argv: List[str]) -> None:
    """`mlprobe scan` on this machine: start the OpenCL child process before anything else is
    imported, since enumerating OpenCL is the slowest capture and everything else hides behind it."""
    import os

    if (len(argv) >= 1 and argv[0] == "scan" and not any(a.startswith("--replay") for a in argv)
            and not os.environ.get("MLPROBE_REPLAY")):
        from ._early import start_opencl_child

        start_opencl_child()


def _safe_streams() -> None:
    """Output never fails on encoding: characters the terminal's encoding lacks are escaped
    (PYTHONIOENCODING=ascii, a C locale, a non-UTF-8 file name)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def _pipe_closed() -> None:
    """The reader went away (`mlprobe plan | head -1`): that is a normal end, exit 0 quietly.
    Whatever is still buffered for stdout goes nowhere instead of failing at exit."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _json_error(argv: List[str], ref: str, what: str, why: Optional[str], next_step: Optional[str],
                code: int) -> None:
    """With --json, an error is a JSON document on stdout too (the human lines stay on stderr)."""
    if "--json" not in argv:
        return
    import json

    doc: Any = {"error": {"ref": ref, "what": what, "why": why, "next": next_step, "exit_code": code}}
    try:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _safe_streams()
    _early_prefetch(argv)
    from . import ui
    from .errors import EXIT_INTERRUPTED, EXIT_USAGE, MlprobeError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        sys.stderr.write(exc.usage)
        print(f"mlprobe: error: {exc}", file=sys.stderr)
        _json_error(argv, "E002", str(exc), None, "see `mlprobe --help` or `mlprobe COMMAND --help`",
                    EXIT_USAGE)
        return EXIT_USAGE
    ui.set_level(getattr(args, "verbosity", 1))
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except MlprobeError as exc:
        print(ui.safe(exc.render()), file=sys.stderr)
        _json_error(argv, exc.ref, exc.what, exc.why, exc.next_step, exc.exit_code)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _pipe_closed()
        return 0
    except SystemExit as exc:
        # rich ends the process with status 1 when the reader of stdout goes away; that is a
        # closed pipe like any other (`mlprobe plan | head -1`).
        if isinstance(exc.__context__, BrokenPipeError):
            _pipe_closed()
            return 0
        raise
    except OSError as exc:
        # A file the command had to read or write (the commands check their paths first; this is the
        # net for a disk that fills up or a permission that changes under them).
        where = f" ({exc.filename})" if exc.filename else ""
        err = MlprobeError(
            f"{exc.strerror or exc}{where}",
            next_step="check that the path exists, that you may read or write it, and that the disk has room",
            ref="E001",
        )
        print(ui.safe(err.render()), file=sys.stderr)
        _json_error(argv, err.ref, err.what, err.why, err.next_step, err.exit_code)
        return err.exit_code
