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


class ParseError(Exception):
    """A capture was read but is not in the format its parser knows. Recorded as a probe error."""


class MlprobeError(Exception):
    """An error a person can act on."""

    def __init__(
        self,
        what: str,
        why: Optional[str] = None,
        next_step: Optional[str] = None,
        ref: str = "E000",
        exit_code: int = EXIT_FAILURE,
    ) -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.next_step = next_step
        self.ref = ref
        self.exit_code = exit_code

    def render(self) -> str:
        lines = [f"error [{self.ref}]: {self.what}"]
        if self.why:
            lines.append(f"  why: {self.why}")
        if self.next_step:
            lines.append(f"  next: {self.next_step}")
        return "\n".join(lines)
