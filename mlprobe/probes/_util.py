"""What every probe does around its parsers: clean pasted text, read a capture and parse it, note
what failed, and say "absent" or "error" when nothing could be read. A capture that is simply not
there costs nothing; one that ran and failed, or that its parser cannot read, is noted."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from ..errors import ParseError
from ..model.facts import Contribution
from ..scan.capture import Capture, Host

T = TypeVar("T")

FAILED = ("error", "timeout")
# ANSI/VT100 control sequences (colours, cursor moves) that a terminal paste or `script` leaves in.
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def sys_path_listing() -> "List[Tuple[str, str]]":
    """(directory, name) for every name in every directory on sys.path, in sys.path order: how
    installed distributions are found without importlib.metadata (which parses all of them)."""
    import os
    import sys

    out: List[Tuple[str, str]] = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        try:
            names = os.listdir(entry)
        except OSError:
            continue
        out.extend((entry, name) for name in names)
    return out


def clean_text(text: str) -> str:
    """CRLF/CR line ends -> LF, ANSI colour codes removed."""
    return ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def key_values(text: str, sep: str = ":") -> Dict[str, str]:
    """`Key: value` lines -> {key: value}, both stripped; lines without `sep` or with an empty key are
    skipped and the first of two equal keys wins (a doubled paste keeps the first reading)."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        key, found, value = line.partition(sep)
        key = key.strip()
        if found and key and key not in out:
            out[key] = value.strip()
    return out


def load_json(text: str, what: str, skip_to: str = "") -> Any:
    """The JSON document of a capture, ANSI codes removed. With `skip_to` (e.g. "{"), whatever comes
    before the first of those characters (a shell prompt, a warning line) is dropped. ParseError when
    it does not parse, also for nesting too deep for Python's decoder."""
    text = ANSI.sub("", text)
    starts = [i for i in (text.find(c) for c in skip_to) if i >= 0]
    if starts:
        text = text[min(starts):]
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"{what} is not JSON: {exc}") from None


def note_failure(cap: Capture, errors: List[str]) -> None:
    """A capture that ran and failed (not one that is simply absent) goes on `errors`."""
    if cap.status in FAILED:
        errors.append(cap.error or f"{cap.name}: {cap.status}")


def parse_capture(
    host: Host,
    name: str,
    parser: Callable[[str], T],
    errors: List[str],
    parse_errors: Optional[List[str]] = None,
) -> Optional[T]:
    """`parser` over capture `name`; None when it is absent (nothing noted), failed (noted in `errors`)
    or not in a format the parser knows (noted in `parse_errors`, by default `errors`)."""
    cap = host.get(name)
    if not cap.ok:
        note_failure(cap, errors)
        return None
    try:
        return parser(cap.text())
    except ParseError as exc:
        (errors if parse_errors is None else parse_errors).append(f"{name}: {exc}")
        return None


def first_parsed(
    host: Host, candidates: Sequence[Tuple[str, Callable[[str], T]]], errors: List[str]
) -> Optional[T]:
    """The first of several captures of the same facts (e.g. the JSON form, then the text form) that
    parses; the failures of those tried before it are noted in `errors`."""
    for name, parser in candidates:
        got = parse_capture(host, name, parser, errors)
        if got is not None:
            return got
    return None


def nothing_read(out: Contribution, errors: List[str], absent_reason: str) -> Contribution:
    """The probe could read none of its captures: "error" where one failed, else "absent"."""
    out.status = "error" if errors else "absent"
    out.error = "; ".join(errors) or absent_reason
    return out


def single_capture(
    host: Host, name: str, parser: Callable[[str], T], out: Contribution, absent_reason: str
) -> Optional[T]:
    """The one capture a probe reads, parsed; None with `out` marked "absent" or "error"."""
    cap = host.get(name)
    if not cap.ok:
        out.status = "error" if cap.status in FAILED else "absent"
        out.error = cap.error or absent_reason
        return None
    try:
        return parser(cap.text())
    except ParseError as exc:
        out.status, out.error = "error", f"{name}: {exc}"
        return None


__all__ = [
    "ANSI",
    "FAILED",
    "clean_text",
    "first_parsed",
    "key_values",
    "load_json",
    "note_failure",
    "nothing_read",
    "parse_capture",
    "single_capture",
]


def clean_lines(text: str) -> List[str]:
    """Lines without ANSI colour codes or carriage returns (terminal pastes carry both)."""
    return [ANSI.sub("", line).replace("\r", "") for line in text.split("\n")]
