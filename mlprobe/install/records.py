"""What a rollback may remove, read from the installer's own records: the RECORD of a distribution
(pip and uv write one for each distribution they install, listing its files relative to
site-packages), the layout `python -m venv` makes, and the compiled files of the sources removed.
A path nothing names is never deleted (transaction.py)."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

from packaging.utils import canonicalize_name

FileState = Tuple[int, int]  # size, mtime_ns
MARKER = ".mlprobe-install"  # in a venv being installed into: the token of its journal

# what `python -m venv` puts into bin/ (Scripts\\): the interpreter's names, pip's, the activate scripts
_VENV_BINS = re.compile(r"(pythonw?|pip)(\d+(\.\d+)?)?(\.exe)?|activate(\.csh|\.fish|\.nu|\.bat|\.ps1)?"
                        r"|Activate\.ps1|deactivate\.bat|pydoc\.bat")


def under(path: str, scope: Iterable[Path]) -> bool:
    return any(path == str(r) or path.startswith(str(r).rstrip(os.sep) + os.sep) for r in scope)


def dist_of(dist_info: Path) -> Tuple[Optional[str], str]:
    """(canonical name, version) from a dist-info folder's METADATA (its name when unreadable)."""
    name: Optional[str] = None
    version = ""
    try:
        with open(dist_info / "METADATA", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key.lower() == "name":
                    name = value.strip()
                elif key.lower() == "version":
                    version = value.strip()
    except OSError:
        stem = dist_info.name[: -len(".dist-info")]
        name, _, version = stem.partition("-")
    return (str(canonicalize_name(name)) if name else None), version


def record_paths(dist_info: Path) -> List[str]:
    """The files a dist-info's RECORD names (pip and uv write them relative to site-packages)."""
    base = dist_info.parent
    out = [str(dist_info / "RECORD")]
    try:
        with open(dist_info / "RECORD", encoding="utf-8", errors="replace", newline="") as f:
            for row in csv.reader(f):
                if row and row[0] and not os.path.isabs(row[0]):
                    out.append(os.path.normpath(os.path.join(base, row[0])))
    except (OSError, csv.Error):
        pass
    return out


def venv_layout(venv: Path) -> List[str]:
    """The files `python -m venv` makes itself (pyvenv.cfg, the interpreter's links, the activate
    scripts): named when the install died before it could journal the venv it made."""
    out = [str(venv / "pyvenv.cfg"), str(venv / "lib64")]
    for scripts in (venv / "bin", venv / "Scripts"):
        try:
            out.extend(str(e) for e in scripts.iterdir() if _VENV_BINS.fullmatch(e.name))
        except OSError:
            continue
    return out


def _orphan_cache(path: str, removed: Set[str]) -> bool:
    """A compiled file in __pycache__ whose source this rollback removed."""
    folder, name = os.path.split(path)
    if os.path.basename(folder) != "__pycache__" or not name.endswith((".pyc", ".pyo")):
        return False
    return os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py") in removed


def remove_recorded(files: Iterable[str], named: Set[str], before: Dict[str, FileState],
            backups: Optional[Dict[str, Path]] = None) -> Set[str]:
    """Delete each file the install recorded; a file that was there before is deleted only when it
    was saved first (it is put back). Then the compiled files of the sources removed."""
    removed: Set[str] = set()
    backups = backups or {}
    rest = []
    for p in files:
        if p in named and (p not in before or p in backups):
            try:
                os.unlink(p)
                removed.add(p)
            except OSError:
                pass
        else:
            rest.append(p)
    for p in rest:
        if p not in before and _orphan_cache(p, removed):
            try:
                os.unlink(p)
                removed.add(p)
            except OSError:
                pass
    return removed


def remove_empty_dirs(dirs: Iterable[str], before: Set[str], removed: Set[str], made: Set[str],
                       stop: str = "") -> None:
    """Folders that were not there before, now empty, that held a removed file (or that the install
    made): deepest first. A folder the person made, or one with anything left in it, stays."""
    holders = set(made)
    for p in removed:
        parent = os.path.dirname(p)
        while parent and parent not in holders and parent != stop and parent not in before:
            holders.add(parent)
            parent = os.path.dirname(parent)
    for d in sorted((d for d in dirs if d not in before and d in holders and d != stop), key=len, reverse=True):
        try:
            os.rmdir(d)
        except OSError:
            continue


def kept_files(roots: List[Path], before: Dict[str, FileState], shallow: Iterable[Path] = ()) -> List[str]:
    """Files there now that were not there before and that the rollback did not remove."""
    files, _ = walk(roots, shallow)
    return sorted(p for p in files if p not in before and not regenerable(p) and not p.endswith(MARKER))




def regenerable(path: str) -> bool:
    return path.endswith((".pyc", ".pyo")) or f"{os.sep}__pycache__" in path


def walk(roots: Iterable[Path], shallow: Iterable[Path] = ()) -> Tuple[Dict[str, FileState], Set[str]]:
    """Every file and folder under roots; and the files directly in each `shallow` folder (an
    interpreter's prefix, where an installer may leave a lock file)."""
    files: Dict[str, FileState] = {}
    dirs: Set[str] = set()
    for folder in shallow:
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if not entry.is_dir(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        files[entry.path] = (st.st_size, st.st_mtime_ns)
        except OSError:
            continue
    stack = [str(r) for r in roots if r.is_dir()]
    dirs.update(stack)
    while stack:
        top = stack.pop()
        try:
            with os.scandir(top) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            dirs.add(e.path)
                            stack.append(e.path)
                        else:
                            st = e.stat(follow_symlinks=False)
                            files[e.path] = (st.st_size, st.st_mtime_ns)
                    except OSError:
                        continue
        except OSError:
            continue
    return files, dirs
