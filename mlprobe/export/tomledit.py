"""Reading and editing a user's TOML file without losing a byte of what they wrote: tomlkit keeps
comments, order and formatting; a file that is not valid TOML is refused before anything is
written, and the new text replaces the old one all at once (a temporary file renamed over it)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Optional

from ..errors import StageError

MAX_BYTES = 8 * 1024 * 1024


def read_text(path: Path) -> Optional[str]:
    """The file's text, None when it does not exist; E414 when it cannot be read as a UTF-8 file."""
    try:
        if not path.exists():
            return None
        if not path.is_file():
            raise StageError(f"--into {path} is not a regular file", why="mlprobe edits a TOML or YAML file in place",
                             next_step="pass the path of your pyproject.toml (or pixi.toml, environment.yml)",
                             ref="E414", kind="usage")
        data = path.read_bytes()[: MAX_BYTES + 1]
    except OSError as exc:
        raise StageError(f"cannot read --into {path}", why=exc.strerror or str(exc),
                         next_step="check the path and that you may read it", ref="E414", kind="usage") from None
    if len(data) > MAX_BYTES:
        raise StageError(f"--into {path} is larger than 8 MiB", why="that is no project file",
                         next_step="pass your project's pyproject.toml", ref="E414", kind="usage")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StageError(f"--into {path} is not UTF-8 text", why=str(exc),
                         next_step="TOML files are UTF-8: fix the file's encoding first", ref="E414",
                         kind="usage") from None


def parse(text: str, where: str) -> Any:
    """tomlkit's document of `text`; E412 (nothing written) when it is not valid TOML."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        return tomlkit.parse(text)
    except (TOMLKitError, ValueError) as exc:
        raise StageError(f"{where} is not valid TOML", why=str(exc).splitlines()[0][:300],
                         next_step=f"fix {where} (the line and column are above), then run the same command; "
                                   "nothing was changed", ref="E412", kind="usage") from None


def check_valid(text: str, where: str) -> None:
    """The written text must read back as TOML with the standard reader too (tomllib/tomli)."""
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]  # novm: tomli below
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
    tomllib.loads(text)


def diff(old: str, new: str, name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


def write_atomically(path: Path, text: str) -> None:
    """`text` into `path` whole or not at all (ui.write_file: a temporary file beside it renamed over
    it, the old mode kept, a symbolic link's file replaced and the link kept)."""
    from ..ui import write_file

    write_file(path, text)
