"""Commands mlprobe prints for a person to paste: every word quoted for the shell it is meant for, so
that a value read from a machine (a device name from clinfo, a path with spaces, a package with
extras) is one argument and never runs anything. POSIX shells get `shlex.quote`; PowerShell gets its
own single-quoted strings, where only the quote characters themselves (ASCII ' and the typographic
quotes PowerShell also accepts) are doubled and nothing else is special."""

from __future__ import annotations

import re
import shlex
from typing import Iterable

# Environment variable names as POSIX and PowerShell take them unquoted.
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# PowerShell ends a single-quoted string at any of these (U+2018, U+2019, U+201A, U+201B as well as ').
_PS_QUOTES = re.compile("['\u2018\u2019\u201a\u201b]")
# Words PowerShell passes to a native command as they are (anything else is quoted).
_PS_BARE = re.compile(r"^[A-Za-z0-9_./:=+\-]+$")


class BadName(ValueError):
    """An environment variable name that no shell takes as one."""


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise BadName(f"{name!r} is not an environment variable name")
    return name


def posix(argv: Iterable[str]) -> str:
    """One POSIX shell command line: each word quoted where it needs it."""
    return " ".join(shlex.quote(str(a)) for a in argv)


def ps_quote(value: str) -> str:
    """A PowerShell single-quoted string holding exactly `value`."""
    return "'" + _PS_QUOTES.sub(lambda m: m.group(0) * 2, value) + "'"


def powershell(argv: Iterable[str]) -> str:
    """One PowerShell command line; a line that starts with a quoted word is run with `&`."""
    words = [a if _PS_BARE.match(a) else ps_quote(a) for a in map(str, argv)]
    line = " ".join(words)
    return "& " + line if words and words[0].startswith("'") else line


def command(argv: Iterable[str], windows: bool = False) -> str:
    return powershell(argv) if windows else posix(argv)


def set_env(name: str, value: str, windows: bool = False) -> str:
    """`export NAME='value'` (POSIX) or `$env:NAME = 'value'` (PowerShell)."""
    check_name(name)
    return f"$env:{name} = {ps_quote(value)}" if windows else f"export {name}={shlex.quote(value)}"


def home_path(path: str, windows: bool = False) -> str:
    """A path for the shell: `~/x` becomes "$HOME"/'x' (POSIX) or (Join-Path $HOME 'x') (PowerShell), so
    the home folder is expanded and the rest stays one quoted word; any other path is quoted whole."""
    if path == "~" or path.startswith("~/"):
        rest = path[2:]
        if windows:
            return f"(Join-Path $HOME {ps_quote(rest.replace('/', chr(92)))})" if rest else "$HOME"
        return '"$HOME"' + (f"/{shlex.quote(rest)}" if rest else "")
    return ps_quote(path) if windows else shlex.quote(path)


def write_file(path: str, text: str, windows: bool = False) -> str:
    """The command that writes `text` (plus a line end) into `path`."""
    if windows:
        return f"Set-Content -Path {home_path(path, True)} -Value {ps_quote(text)}"
    return f"printf '%s\\n' {shlex.quote(text)} > {home_path(path)}"
