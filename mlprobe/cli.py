"""Command line: `mlprobe scan|capture|schema|plan|install|bundle|verify|doctor|report|diff|fleet|labels`.

Each command lives in mlprobe/commands/<name>.py with `register(subparsers)`; the parser it adds
sets `func(args) -> int`. Command modules import their heavy parts inside `func`, so that
`mlprobe scan --json` stays fast.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, List, NoReturn, Optional

from . import __version__

if TYPE_CHECKING:
    import argparse

COMMANDS = ["scan", "capture", "schema", "plan", "install", "bundle", "verify", "doctor", "report", "diff",
            "fleet", "labels", "export", "completion"]

EXIT_CODES_HELP = """exit codes:
  0    done (diff: no differences)
  1    a real failure found (verify: wrong results; install failed; doctor: something blocks;
       diff: differences)
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

    class HelpFormatter(argparse.RawDescriptionHelpFormatter):
        """argparse's help no wider than 100 columns (the terminal's width where narrower); a
        description or epilog keeps its own line breaks and indentation, and a line of it that is
        too long is wrapped with its continuation indented (a command in backquotes kept whole)."""

        def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                     width: "int | None" = None) -> None:
            import shutil

            width = min(100, shutil.get_terminal_size((100, 24)).columns) - 2 if width is None else width
            super().__init__(prog, indent_increment, max_help_position, width)

        def _fill_text(self, text: str, width: int, indent: str) -> str:
            from .width import wrap_plain

            return "\n".join(out for line in text.splitlines() for out in wrap_plain(indent + line, width))

    class Parser(argparse.ArgumentParser):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["formatter_class"] = HelpFormatter  # every command's help keeps the same width
            super().__init__(*args, **kwargs)

        def error(self, message: str) -> "NoReturn":
            raise UsageError(self._in_words(message), self.format_usage())

        def _in_words(self, message: str) -> str:
            """argparse names a positional argument by its variable ("argument which"): name it as
            its usage line shows it (SCHEMA, SHELL), with its choices."""
            for action in self._actions:
                if action.option_strings or action.dest in ("command", argparse.SUPPRESS):
                    continue
                shown = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
                # an invalid choice already lists the choices: the name adds nothing
                message = re.sub(rf"\bargument {re.escape(action.dest)}: ",
                                 "" if action.choices else f"{shown}: ", message)
                if action.choices:
                    shown += " (one of: " + ", ".join(str(c) for c in action.choices) + ")"
                message = re.sub(rf"(required: (?:[^,]+, )*){re.escape(action.dest)}\b", rf"\g<1>{shown}", message)
            return message

    return Parser


def command_of(argv: List[str]) -> Optional[str]:
    """The command a command line names (its first word that is not an option), when it is one of
    ours: only that command's parser is then built (each command module imports what its options
    need). None for `--help`, `-V`, no command or an unknown word: the whole parser says what to do."""
    for word in argv:
        if word in ("-h", "--help", "-V", "--version", "--"):
            return None
        if word.startswith("-"):
            continue
        return word if word in COMMANDS else None
    return None


def build_parser(only: Optional[str] = None) -> "argparse.ArgumentParser":
    import argparse
    import importlib
    import importlib.util

    parser = _parser_class()(
        prog="mlprobe",
        description="Which deep-learning stack can really use this hardware, how to get it, "
        "and does it actually go faster?",
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("-V", "--version", action="version", version=f"mlprobe {__version__}")
    _add_verbosity(parser, 1)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in ([only] if only in COMMANDS else COMMANDS):
        modname = f"mlprobe.commands.{name}"
        if importlib.util.find_spec(modname) is None:
            continue
        importlib.import_module(modname).register(sub)
    for p in sub.choices.values():  # `mlprobe -q scan` and `mlprobe scan -q` both work
        _add_verbosity(p, argparse.SUPPRESS)
    _describe(sub)
    return parser


def _describe(sub: Any) -> None:
    """Every command (and sub-command) has a description: its one-line help where it has no longer
    one, so `mlprobe X --help` always says what X does."""
    for choice in getattr(sub, "_choices_actions", []):
        p = sub.choices.get(choice.dest)
        if p is None:
            continue
        if not p.description and choice.help:
            p.description = choice.help[:1].upper() + choice.help[1:] + "."
        for action in p._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                _describe(action)


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

    if (command_of(argv) == "scan" and not any(a.startswith("--replay") for a in argv)
            and not os.environ.get("MLPROBE_REPLAY")):
        from .scan.live._early import start_opencl_child, start_tools

        start_opencl_child()
        start_tools()


def _safe_streams() -> None:
    """Output never fails on encoding: characters the terminal's encoding lacks are escaped
    (PYTHONIOENCODING=ascii, a C locale, a non-UTF-8 file name). A stream closed at start
    (`>&-`, `2>&-`: Python makes it None) writes to nothing instead of failing."""
    import os

    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def _pipe_closed(stdout: bool = True) -> None:
    """The reader went away (`mlprobe plan | head -1`): that is a normal end, exit 0 quietly.
    Whatever is still buffered for stdout (or stderr, with `2>&1 | head -1`) goes nowhere instead
    of failing at exit."""
    import os

    for stream in ((sys.stdout, sys.stderr) if stdout else (sys.stderr,)):
        try:
            fd = stream.fileno()
            if stream is sys.stderr and not _reader_gone(fd):
                continue
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass


def _reader_gone(fd: int) -> bool:
    """A pipe whose reading end is closed (poll reports an error on the writing end)."""
    import select

    if not hasattr(select, "poll"):
        return False
    try:
        p = select.poll()
        p.register(fd, select.POLLOUT)
        return any(ev & select.POLLERR for _fd, ev in p.poll(0))
    except (OSError, ValueError):
        return False


def _say(text: str) -> None:
    """An error line on stderr; a stderr nobody reads any more does not change the exit status."""
    if sys.stderr is None:  # started with stderr closed (`2>&-`)
        return
    try:
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        _pipe_closed(stdout=False)


def _json_error(argv: List[str], ref: str, what: str, why: Optional[str], next_step: Optional[str],
                code: int) -> None:
    """With --json, an error is a JSON document on stdout too (the human lines stay on stderr)."""
    if "--json" not in argv:
        return
    import json

    doc: Any = {"schema": "mlprobe.error/1", "error": {"ref": ref, "what": what, "why": why, "next": next_step, "exit_code": code}}
    try:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def main(argv: Optional[List[str]] = None) -> int:
    code = _main(list(sys.argv[1:] if argv is None else argv))
    try:  # what is still buffered: a reader that went away is a normal end, not exit 120
        sys.stdout.flush()
    except (OSError, ValueError):
        _pipe_closed()
    return code


def _main(argv: List[str]) -> int:
    _safe_streams()
    _early_prefetch(argv)
    from . import ui
    from .errors import EXIT_INTERRUPTED, EXIT_USAGE, LibraryError, MlprobeError

    parser = build_parser(only=command_of(argv))
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        _say(exc.usage + f"mlprobe: error: {exc}")
        _json_error(argv, "E002", str(exc), None, "see `mlprobe --help` or `mlprobe COMMAND --help`",
                    EXIT_USAGE)
        return EXIT_USAGE
    ui.set_level(getattr(args, "verbosity", 1))
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        try:
            return int(args.func(args) or 0)
        except LibraryError as narrow:
            from .commands.advice import advice

            raise advice(narrow) from None
    except MlprobeError as exc:
        _say(ui.error_text(exc.render()))
        _json_error(argv, exc.ref, exc.what, exc.why, exc.next_step, exc.exit_code)
        return exc.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
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
        _say(ui.error_text(err.render()))
        _json_error(argv, err.ref, err.what, err.why, err.next_step, err.exit_code)
        return err.exit_code
