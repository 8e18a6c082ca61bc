"""The folder a command writes into (capture, bundle): a symlink to a folder is followed, as
`install --venv` follows it, so the bundle lands in the folder the link names and the link stays;
and an OSError's errno named in words with the next step it asks for (not "free some space" for
every cause)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Tuple


def real_folder(path: Path) -> Path:
    """`path` made absolute; when it is a symlink to a folder, the folder it leads to."""
    p = Path(os.path.abspath(os.path.expanduser(str(path))))
    if p.is_symlink() and p.is_dir():
        return Path(os.path.realpath(p))
    return p


def cause_and_next(exc: OSError, folder: Path) -> Tuple[str, str]:
    """(what went wrong, what to do) for an OSError met while writing into `folder`."""
    code = exc.errno
    what = exc.strerror or str(exc)
    if exc.filename:
        what = f"{what}: {exc.filename}"
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return what, "free some space (or pick another place), then run the same command again"
    if code in (errno.EACCES, errno.EPERM):
        return what, "pick a folder you can write to (or change its permissions), then run the same command again"
    if code == errno.EROFS:
        return what, "the file system is read-only: pick a folder on another one"
    if code in (errno.ENOTDIR, errno.ELOOP):
        return what, (f"a part of {folder} is not a folder (a file, or a symlink that leads to none): "
                      "pass a path of folders")
    if code == errno.ENAMETOOLONG:
        return what, "pick a shorter path"
    return what, "pick another place, then run the same command again"
