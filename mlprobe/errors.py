"""User-facing errors: what happened, why, and the next step, with a short stable reference."""

from __future__ import annotations

from typing import Optional

# Exit codes (named, stable).
EXIT_OK = 0
EXIT_FAILURE = 1  # the command ran and found a real failure (verify: wrong results, install failed)
EXIT_USAGE = 2  # bad arguments or input
EXIT_UNAVAILABLE = 3  # nothing usable (e.g. no recipe fits, no device to verify)
EXIT_INTERRUPTED = 130


class LibraryError(Exception):
    """A narrow failure of library code (a bad index location, an invalid override, ...). It says
    what went wrong in facts; the command layer (mlprobe/commands/advice.py) turns it into the
    MlprobeError a person sees: reference, why, next step and exit code."""


def _one_line(text: str) -> str:
    """A part of an error on its own line: a line break inside it (from a path or a tool's output) is
    written as `\\n`, so nothing it carries can start a line that reads as another error or step."""
    return text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_error(ref: str, what: str, why: Optional[str], next_step: Optional[str]) -> str:
    lines = [f"error [{ref}]: {_one_line(what)}"]
    if why:
        lines.append(f"  why: {_one_line(why)}")
    if next_step:
        lines.append(f"  next: {_one_line(next_step)}")
    return "\n".join(lines)


STAGE_KINDS = ("ok", "failure", "usage", "unavailable", "interrupted")


def exit_status(kind: str) -> int:
    """The exit status of a command whose stage ended with this kind of outcome."""
    return {"ok": EXIT_OK, "failure": EXIT_FAILURE, "usage": EXIT_USAGE, "unavailable": EXIT_UNAVAILABLE,
            "interrupted": EXIT_INTERRUPTED}[kind]


class Explained(Exception):
    """An error that says what happened, why and what to do next, with a stable reference."""

    def __init__(self, what: str, why: Optional[str] = None, next_step: Optional[str] = None,
                 ref: str = "E000") -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.next_step = next_step
        self.ref = ref

    def render(self) -> str:
        """The lines a person sees for it (logs and notes inside a stage use them too)."""
        return render_error(self.ref, self.what, self.why, self.next_step)


class StageError(LibraryError, Explained):
    """A stage (install, verify, fleet) could not do its work. It says what happened, why and what
    to do next, with its stable reference, and the kind of outcome: "usage" (the request or its input
    is wrong), "unavailable" (nothing usable: no interpreter, no index, no tool), "failure" (it ran and
    failed) or "interrupted". Which exit status that is, is the command layer's business
    (`exit_status`, through commands/advice.py)."""

    def __init__(
        self,
        what: str,
        why: Optional[str] = None,
        next_step: Optional[str] = None,
        ref: str = "E000",
        kind: str = "failure",
    ) -> None:
        if kind not in STAGE_KINDS[1:]:
            raise ValueError(f"unknown StageError kind {kind!r}")
        super().__init__(what, why, next_step, ref)
        self.kind = kind


def error_text(exc: BaseException) -> str:
    """One line for an error recorded inside a document (a report's verify note, a fleet node's
    error): a stage error by its reference and what happened, anything else by its type."""
    if isinstance(exc, StageError):
        return f"[{exc.ref}] {exc.what}"
    return f"{type(exc).__name__}: {getattr(exc, 'what', None) or exc}"


class ParseError(Exception):
    """A capture was read but is not in the format its parser knows. Recorded as a probe error."""


class MlprobeError(Explained):
    """An error a person can act on: the command layer's, with its exit status."""

    def __init__(
        self,
        what: str,
        why: Optional[str] = None,
        next_step: Optional[str] = None,
        ref: str = "E000",
        exit_code: int = EXIT_FAILURE,
    ) -> None:
        super().__init__(what, why, next_step, ref)
        self.exit_code = exit_code
