"""What mlprobe says besides its answer: the verbosity chosen on the command line (`--quiet`,
`--verbose`), progress lines on stderr (only on a terminal), and text from captures made safe to
print (control characters and ANSI escape sequences shown escaped, never sent to the terminal)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Optional

QUIET, NORMAL, VERBOSE = 0, 1, 2
_level = NORMAL


def set_level(level: int) -> None:
    global _level
    _level = level


def level() -> int:
    return _level


def quiet() -> bool:
    return _level <= QUIET


def verbose() -> bool:
    return _level >= VERBOSE


def note(text: str) -> None:
    """A side remark on stderr (where a file went, how to replay it); silent with --quiet."""
    if not quiet():
        print(text, file=sys.stderr)


def debug(text: str) -> None:
    """Detail on stderr with --verbose only."""
    if verbose():
        print(safe(text), file=sys.stderr)


# Width of output that is not a terminal (a pipe, a file, a log): wide enough for a table, narrow
# enough to read. A printed command, URL or path is never broken, so it may run past it.
PIPE_WIDTH = 100


def console(file: Any = None, stderr: bool = False, **kwargs: Any) -> Any:
    """A rich Console that keeps mlprobe's width contract: on a terminal its width, piped or
    redirected PIPE_WIDTH columns; prose is wrapped with its continuation indented, a printed command
    (`$ …`) or a backquoted one is never broken, a table too wide for the width is shown as one block
    per row, and nothing is coloured that mlprobe did not style (rich's highlighter is off)."""
    from .width import WidthConsole

    kwargs.setdefault("highlight", False)
    con = WidthConsole(file=file, stderr=stderr, **kwargs)
    if not con.is_terminal and "width" not in kwargs:
        con = WidthConsole(file=file, stderr=stderr, width=PIPE_WIDTH, **kwargs)
    return con


def output_width(stream: Any = None) -> int:
    """The width plain text written to `stream` (stdout by default) is wrapped at."""
    import shutil

    s = stream if stream is not None else sys.stdout
    try:
        tty = s.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return PIPE_WIDTH
    return max(20, shutil.get_terminal_size((PIPE_WIDTH, 24)).columns)


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def error_text(rendered: str) -> str:
    """An error's lines (`error [Exxx]:`, `why:`, `next:`) as stderr shows them: control characters
    escaped; on a terminal wrapped at its width with continuations indented (commands kept whole);
    piped or redirected, each part stays one line, as a log reader or a script that greps expects."""
    text = safe(rendered)
    if not stderr_is_terminal():
        return text
    from .width import wrap_text_block

    return wrap_text_block(text, output_width(sys.stderr))


def say_error(rendered: str) -> None:
    """An error on stderr (also with --quiet), as `error_text` shows it."""
    try:
        sys.stderr.write(error_text(rendered) + "\n")
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass


def progress_enabled() -> bool:
    return not quiet() and stderr_is_terminal() and os.environ.get("TERM") != "dumb"


# C0 and C1 control characters except tab and newline (ESC included: an escape sequence from a
# capture is shown as text, e.g. `\x1b[31m`, so it can neither colour nor move the terminal), the
# Unicode line separators, and every bidirectional control (embeddings, overrides, isolates and the
# marks LRM, RLM, ALM), which would reorder the text that follows them.
_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def safe(text: Any) -> str:
    """Text from a capture or a user, with every control character written as an escape."""
    s = str(text)
    if not _CONTROL.search(s):
        return s

    def esc(m: "re.Match[str]") -> str:
        c = m.group(0)
        o = ord(c)
        return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"

    return _CONTROL.sub(esc, s)


def json_safe(text: str) -> str:
    """JSON text (json.dumps with ensure_ascii=False) with the control characters it leaves raw (C1,
    bidirectional marks) written as \\uXXXX escapes: the same JSON values, nothing a terminal obeys.
    (They can only stand inside strings: JSON's own syntax is ASCII.)"""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def markup_safe(text: Any) -> str:
    """`safe`, and rich's markup escaped: text that is shown as it is inside rich markup (a tag-like
    `[/x]` is not a tag, a trailing backslash does not escape the tag that follows it)."""
    out = safe(text)
    if "[" in out or out.endswith("\\"):
        from rich.markup import escape

        out = escape(out)
    return out


def deep_safe(obj: Any, markup: bool = False) -> Any:
    """`safe` over every string of a JSON-like value or a (frozen) dataclass tree, dict keys
    included; with `markup`, rich's markup characters are escaped too (for values printed inside
    rich markup)."""
    import dataclasses

    if isinstance(obj, str):
        return markup_safe(obj) if markup else safe(obj)
    if isinstance(obj, dict):
        return {deep_safe(k, markup) if isinstance(k, str) else k: deep_safe(v, markup)
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [deep_safe(v, markup) for v in obj]
    if isinstance(obj, tuple):
        return tuple(deep_safe(v, markup) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: deep_safe(getattr(obj, f.name), markup) for f in dataclasses.fields(obj)
                   if f.init}
        return dataclasses.replace(obj, **changes)
    return obj


def display_path(path: Any) -> str:
    """A path as text that can be printed and stored in JSON: bytes that are not UTF-8 (a folder
    name from another locale) are written as escapes (\\xff) instead of lone surrogates."""
    s = os.fspath(path) if isinstance(path, os.PathLike) else path
    if isinstance(s, bytes):
        s = os.fsdecode(s)
    s = str(s)
    # control characters and line breaks escaped too: a path in a message, a comment line or a node
    # name stays on its line (a folder named "x\\nkey=value" adds no line anywhere)
    return safe_line(s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))


def encodable(text: str) -> str:
    """Text without lone surrogates (anything that slipped past display_path is escaped)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def write_file(path: Any, text: str) -> None:
    """Write a whole file or nothing: the text is encoded first and lands under a temporary name,
    renamed over `path` only when complete (an error never leaves a 0-byte or half file). A device or
    FIFO (`-o /dev/null`, `-o /dev/stdout`) is written in place; through a symbolic link, the file it
    names is replaced and the link stays."""
    write_chunks(path, [text.encode("utf-8", "backslashreplace")])


def write_chunks(path: Any, chunks: Iterable[bytes]) -> None:
    """write_file of bytes made piece by piece (a large fleet report is never whole in memory)."""
    import stat
    import tempfile

    target = os.fspath(path)
    try:
        st = os.stat(target)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        # /dev/null, /dev/stdout, a FIFO: written like `> FILE` would, never replaced by a file
        # (as root, replacing /dev/null would break the system).
        _write_stream(target, chunks, st.st_mode)
        return
    if st is not None and os.path.islink(target):
        target = os.path.realpath(target)  # the file the link names is updated; the link stays
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".mlprobe-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            for data in chunks:
                fh.write(data)
        try:
            mode = os.stat(target).st_mode & 0o777
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_stream(target: Any, chunks: Iterable[bytes], mode: int) -> None:
    """Write into a device or FIFO in place. A FIFO nobody reads is an error, not a hang."""
    import errno
    import stat

    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "it is a folder", target)
    flags = os.O_WRONLY
    if stat.S_ISFIFO(mode):
        flags |= getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "it is a FIFO (named pipe) that no process is reading", target) from None
        raise
    if stat.S_ISFIFO(mode) and hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as fh:
        for data in chunks:
            fh.write(data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def safe_line(text: Any) -> str:
    """`safe`, and newlines too (for a value that must stay on one line)."""
    return safe(text).replace("\n", "\\n").replace("\t", " ")


@contextlib.contextmanager
def progress(label: str, detail: Optional[Callable[[], str]] = None) -> Iterator[Callable[[str], None]]:
    """A one-line status on stderr while a long step runs: the label, the elapsed seconds and, when
    `detail` is given, what the step is waiting on. Nothing at all when stderr is not a terminal or
    with --quiet. Yields a function that changes the label."""
    if not progress_enabled():
        yield lambda _s: None
        return
    state = {"label": label}
    stop = threading.Event()
    started = time.monotonic()
    out = sys.stderr

    def line() -> str:
        extra = ""
        if detail is not None:
            try:
                extra = detail()
            except Exception:  # a progress line must never cost the command
                extra = ""
        text = f"{state['label']} ({time.monotonic() - started:.0f} s)" + (f": {extra}" if extra else "")
        return safe_line(text)[:200]

    def loop() -> None:
        while not stop.wait(0.5):
            try:
                out.write("\r\x1b[2K" + line())
                out.flush()
            except (OSError, ValueError):
                return

    t = threading.Thread(target=loop, daemon=True, name="mlprobe-progress")
    t.start()
    try:
        yield lambda s: state.__setitem__("label", s)
    finally:
        stop.set()
        t.join(timeout=1)
        try:
            out.write("\r\x1b[2K")
            out.flush()
        except (OSError, ValueError):
            pass


def count(n: Optional[int], word: str) -> str:
    """`1 core`, `2 cores`, `cores unknown`."""
    if n is None:
        return f"{word}s unknown"
    return f"{n} {word}" + ("" if n == 1 else "s")
