"""All or nothing: an install that fails at any step (index down, 404, broken or incompatible wheel,
conflict, Ctrl-C, a timeout, an import that crashes) leaves an existing environment as it was and
removes a venv that it was making.

How an existing environment is put back, independent of pip's or uv's own rollback:
  1. before: the list of distributions (the same names and versions `pip freeze` shows) and every
     file and folder under the environment (size + mtime);
  2. before installing: a copy of the files (RECORD) of each installed distribution the resolution
     says will be replaced, and of each file mlprobe itself edits (activate scripts);
  3. on failure: delete every file and folder that was not there before, copy the saved files back,
     and check that the distribution list is the same again; anything that still differs is reported.

An install that died (kill -9, a power cut) is rolled back by a later run from its journal, and
only what the install itself recorded is removed: the files the journal names (those mlprobe writes,
the venv `python -m venv` made, the mark), and the files the installer's RECORD names for each
distribution the journal says it was installing (pip and uv write one per installed distribution).
A path that neither names is never deleted, whatever the timing: it is kept and named in the result
(a notebook saved into the venv, a half-extracted wheel the installer never finished). The journal
also records the resolved path and the inode of each folder it works on and a mark (a file with a
random token) in a venv: a folder replaced since (a venv re-created, a symlink pointed elsewhere) or
a mark that is gone means the target is no longer the one the install worked on, and nothing is
touched.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Literal, Optional, Set, Tuple, Type

from packaging.utils import canonicalize_name

from ..errors import StageError
from ..model.jsontypes import JsonObject, JsonValue
from .proc import NoInterrupt, Transcript
from .records import (
    MARKER,
    FileState,
    dist_of,
    kept_files,
    record_paths,
    regenerable,
    remove_empty_dirs,
    remove_recorded,
    under,
    venv_layout,
    walk,
)
from .venv import list_distributions

if TYPE_CHECKING:
    from .guard import Journal


STOP_ENV = "MLPROBE_TEST_JOURNAL_STOP"  # =N: the process SIGKILLs itself right after its N-th journal write


def _real(path: Path) -> Path:
    """The folder itself, whatever symlinks the path went through."""
    return Path(os.path.realpath(os.path.abspath(str(path))))


def _real_parent(path: str) -> str:
    """A file's path through the real folder (the file itself may be a symlink: not followed)."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _identity(path: Path) -> Optional[Tuple[int, int]]:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class JournalError(ValueError):
    """A journal of the wrong shape (truncated, hand-edited, from another version)."""


@dataclass
class EnvSnapshot:
    dists: Dict[str, Tuple[str, str]] = field(default_factory=dict)  # canonical name -> (name, version)
    dist_files: Dict[str, List[str]] = field(default_factory=dict)
    files: Dict[str, FileState] = field(default_factory=dict)
    dirs: Set[str] = field(default_factory=set)

    def freeze(self) -> List[str]:
        return sorted(f"{n}=={v}" for n, v in self.dists.values())


def snapshot(python: str, roots: List[Path], shallow: Iterable[Path] = ()) -> EnvSnapshot:
    snap = EnvSnapshot()
    for d in list_distributions(python):
        key = str(canonicalize_name(d.name))
        snap.dists[key] = (d.name, d.version)
        snap.dist_files[key] = list(d.files)
    snap.files, snap.dirs = walk(roots, shallow)
    return snap


@dataclass
class RestoreReport:
    ok: bool
    removed_venv: Optional[str] = None
    deleted_files: int = 0
    restored_files: int = 0
    freeze_differs: List[str] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    modified: List[str] = field(default_factory=list)
    refused: Optional[str] = None  # recovered: the target changed since, so nothing was touched
    emptied_folder: bool = False  # the venv was made in a folder that existed (empty): it stays
    kept: List[str] = field(default_factory=list)  # files neither the journal nor a RECORD names: kept
    kept_packages: List[str] = field(default_factory=list)  # installed, but not by this install: kept

    def kept_text(self) -> str:
        parts = []
        if self.kept:
            shown = ", ".join(self.kept[:10]) + (f" and {len(self.kept) - 10} more" if len(self.kept) > 10 else "")
            parts.append(f"kept {len(self.kept)} file(s) the install did not record (neither its journal nor "
                         f"an installer's RECORD names them): {shown}")
        if self.kept_packages:
            parts.append("kept the package(s) it did not install: " + ", ".join(self.kept_packages[:10]))
        return "; ".join(parts)

    def summary(self) -> str:
        if self.refused:
            return f"left as it is: {self.refused}"
        kept = self.kept_text()
        tail = f"; {kept}" if kept else ""
        if self.removed_venv and self.ok and self.kept:
            return f"removed what the install had made in {self.removed_venv}{tail}"
        if self.removed_venv and self.emptied_folder and self.ok:
            return f"removed what the install had put into {self.removed_venv} (the folder stays, empty)"
        if self.removed_venv and self.ok:
            return f"removed the half-made environment {self.removed_venv}"
        if self.ok:
            return (f"environment restored: {self.deleted_files} file(s) the install made removed, "
                    f"{self.restored_files} saved file(s) put back; its packages are as before{tail}")
        return "environment NOT fully restored: " + "; ".join(
            x for x in (
                f"packages differ: {', '.join(self.freeze_differs[:8])}" if self.freeze_differs else "",
                f"{len(self.missing)} file(s) missing, e.g. {self.missing[0]}" if self.missing else "",
                f"{len(self.modified)} file(s) changed, e.g. {self.modified[0]}" if self.modified else "",
                kept,
            ) if x)


class Transaction:
    """with Transaction(...) as txn: create/modify; an exception (KeyboardInterrupt included) rolls
    back, then propagates (or becomes E511 when the rollback itself could not finish)."""

    def __init__(self, transcript: Transcript, *, env_python: Optional[str] = None,
                 roots: Optional[List[Path]] = None, new_venv: Optional[Path] = None,
                 new_venv_was_empty_dir: bool = False, shallow: Optional[List[Path]] = None,
                 journal: Optional[str] = None, marker_root: Optional[Path] = None) -> None:
        self.transcript = transcript
        self.journal = journal  # the target whose journal (guard.py) records this transaction
        self.env_python = env_python
        # Resolved once: a symlink pointed elsewhere later must not redirect a rollback.
        self.roots = [_real(r) for r in roots or []]
        self.shallow = [_real(r) for r in shallow or []]
        self.new_venv = _real(new_venv) if new_venv is not None else None
        self.new_venv_was_empty_dir = new_venv_was_empty_dir
        self.marker_root = _real(marker_root) if marker_root is not None else self.new_venv
        self.token = secrets.token_hex(16)
        self.identity: Dict[str, Tuple[int, int]] = {}  # resolved folder -> (st_dev, st_ino)
        self.marked = False
        self.made: List[str] = []  # files mlprobe writes that were not there: removed on a rollback
        self.installing: List[Tuple[str, str]] = []  # (canonical name, version or "") the installer installs
        self.venv_files: Optional[List[str]] = None  # what `python -m venv` made (a new venv)
        self.venv_dirs: List[str] = []
        self.saves = 0  # journal writes so far (STOP_ENV counts them)
        self.before: Optional[EnvSnapshot] = None
        self.backup_dir: Optional[Path] = None
        self.backups: Dict[str, Path] = {}
        self.report: Optional[RestoreReport] = None
        self.committed = False
        self.recovered = False  # rebuilt from a journal after the process that made it died
        self.outside: List[str] = []  # made outside the roots (created()): removed on a rollback

    # ------------------------------------------------------------------ journal ------------
    def to_journal(self) -> JsonObject:
        before: Optional[JsonObject] = None
        if self.before is not None:
            before = {"dists": {k: [n, v] for k, (n, v) in self.before.dists.items()},
                      "files": {k: [size, mtime] for k, (size, mtime) in self.before.files.items()},
                      "dirs": [d for d in sorted(self.before.dirs)]}
        return {"new_venv": str(self.new_venv) if self.new_venv else None,
                "new_venv_was_empty_dir": self.new_venv_was_empty_dir, "env_python": self.env_python,
                "roots": [str(r) for r in self.roots], "shallow": [str(r) for r in self.shallow],
                "marker_root": str(self.marker_root) if self.marker_root else None, "token": self.token,
                "marked": self.marked, "identity": {k: list(v) for k, v in self.identity.items()},
                "backup_dir": str(self.backup_dir) if self.backup_dir else None,
                "backups": {k: str(v) for k, v in self.backups.items()}, "before": before,
                "outside": list(self.outside), "made": list(self.made),
                "installing": [[n, v] for n, v in self.installing],
                "venv_files": list(self.venv_files) if self.venv_files is not None else None,
                "venv_dirs": list(self.venv_dirs)}

    @classmethod
    def from_journal(cls, journal: "Journal", transcript: Transcript) -> "Transaction":
        """The transaction a journal describes; JournalError when any field has the wrong type."""
        doc = journal.fields

        def opt_str(key: str) -> Optional[str]:
            v = doc.get(key)
            if v is None or (isinstance(v, str) and v):
                return v
            raise JournalError(f"{key!r} is not a path")

        def str_list(v: JsonValue, key: str) -> List[str]:
            if not isinstance(v, list):
                raise JournalError(f"{key!r} is not a list of paths")
            out = [x for x in v if isinstance(x, str) and x]
            if len(out) != len(v):
                raise JournalError(f"{key!r} is not a list of paths")
            return out

        def pair(v: JsonValue, key: str) -> Tuple[int, int]:
            if isinstance(v, list) and len(v) == 2:
                a, b = v
                if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool) and not isinstance(b, bool):
                    return (a, b)
            raise JournalError(f"{key!r} is not a pair of integers")

        def str_map(v: JsonValue, key: str) -> JsonObject:
            if not isinstance(v, dict) or not all(k for k in v):
                raise JournalError(f"{key!r} is not an object of paths")
            return v

        token = doc.get("token")
        if not isinstance(token, str) or not isinstance(doc.get("new_venv_was_empty_dir", False), bool) \
                or not isinstance(doc.get("marked", False), bool):
            raise JournalError("'token', 'marked' or 'new_venv_was_empty_dir' has the wrong type")
        new_venv = opt_str("new_venv")
        marker_root = opt_str("marker_root")
        roots = str_list(doc.get("roots", []), "roots")
        shallow = str_list(doc.get("shallow", []), "shallow")
        txn = cls(transcript, env_python=opt_str("env_python"), roots=[Path(r) for r in roots],
                  new_venv=Path(new_venv) if new_venv else None,
                  new_venv_was_empty_dir=bool(doc.get("new_venv_was_empty_dir")),
                  shallow=[Path(r) for r in shallow],
                  journal=None, marker_root=Path(marker_root) if marker_root else None)
        opt_str("target")  # recover() drops the journal it read, by its own path
        # recorded resolved already: kept as written, never resolved again
        txn.roots = [Path(r) for r in roots]
        txn.shallow = [Path(r) for r in shallow]
        txn.new_venv = Path(new_venv) if new_venv else None
        txn.marker_root = Path(marker_root) if marker_root else None
        txn.token = token
        txn.marked = bool(doc.get("marked"))
        txn.identity = {k: pair(v, "identity") for k, v in str_map(doc.get("identity", {}), "identity").items()}
        before = doc.get("before")
        if before is not None:
            if not isinstance(before, dict):
                raise JournalError("'before' is not an object")
            dists: Dict[str, Tuple[str, str]] = {}
            for k, v in str_map(before.get("dists", {}), "before.dists").items():
                if not (isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], str)):
                    raise JournalError("'before.dists' is not an object of [name, version]")
                dists[k] = (v[0], v[1])
            files = str_map(before.get("files", {}), "before.files")
            txn.before = EnvSnapshot(
                dists=dists, files={k: pair(v, "before.files") for k, v in files.items()},
                dirs=set(str_list(before.get("dirs", []), "before.dirs")))
        backup_dir = opt_str("backup_dir")
        txn.backup_dir = Path(backup_dir) if backup_dir else None
        backups = str_map(doc.get("backups", {}), "backups")
        txn.backups = {k: Path(v) for k, v in backups.items() if isinstance(v, str) and v}
        if len(txn.backups) != len(backups):
            raise JournalError("'backups' is not an object of paths")
        txn.outside = str_list(doc.get("outside", []), "outside")
        txn.made = str_list(doc.get("made", []), "made")
        installing = doc.get("installing", [])
        if not isinstance(installing, list) or not all(
                isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x) for x in installing):
            raise JournalError("'installing' is not a list of [name, version]")
        txn.installing = [(str(x[0]), str(x[1])) for x in installing if isinstance(x, list)]
        vf = doc.get("venv_files")
        txn.venv_files = None if vf is None else str_list(vf, "venv_files")
        txn.venv_dirs = str_list(doc.get("venv_dirs", []), "venv_dirs")
        txn.recovered = True
        return txn

    def _save(self) -> None:
        if self.journal is not None and not self.committed:
            from .guard import write_journal

            write_journal(self.journal, self.to_journal())
            self.saves += 1
            if os.environ.get(STOP_ENV) == str(self.saves):  # tests: a kill -9 right at this step
                os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))

    def _forget(self) -> None:
        if self.journal is not None:
            from .guard import drop_journal

            drop_journal(self.journal)

    def _mark(self, root: Path) -> None:
        """Record the folder's identity and leave the mark of this journal in it."""
        ident = _identity(root)
        if ident is None:
            return
        self.identity[str(root)] = ident
        if root == self.marker_root:
            try:
                with open(root / MARKER, "w", encoding="utf-8") as f:
                    f.write(self.token + "\n")
                self.marked = True
            except OSError as exc:
                self.transcript.note(f"could not leave the install's mark in {root}: {exc}")
        self._save()

    def _unmark(self) -> None:
        if self.marker_root is not None and self.marked:
            try:
                if (self.marker_root / MARKER).read_text(encoding="utf-8").strip() == self.token:
                    (self.marker_root / MARKER).unlink()
            except OSError:
                pass

    def claim_new_venv(self) -> None:
        """Before the venv is created: make its folder (when missing), note its identity, mark it."""
        assert self.new_venv is not None
        if not os.path.lexists(self.new_venv):
            self.new_venv.mkdir(parents=True)
        self._mark(self.new_venv)

    def venv_made(self) -> None:
        """`python -m venv` finished: what it made is the install's (removed on a rollback)."""
        assert self.new_venv is not None
        files, dirs = walk([self.new_venv])
        marker = str(self.new_venv / MARKER)
        self.venv_files = sorted(p for p in files if p != marker)
        self.venv_dirs = sorted(d for d in dirs if d != str(self.new_venv))
        self._save()

    def will_install(self, dists: Iterable[Tuple[str, str]]) -> None:
        """Before the installer runs: the distributions it installs (version "" when not known). Their
        RECORD files name what a rollback removes; no other distribution is touched."""
        self.installing = sorted({(str(canonicalize_name(n)), v) for n, v in dists})
        self._save()

    # ------------------------------------------------------------------ before -------------
    def begin(self) -> None:
        if self.env_python and self.new_venv is None:
            self.before = snapshot(self.env_python, self.roots, self.shallow)
            self.transcript.note("snapshot of the environment before installing "
                                 f"({len(self.before.dists)} distributions, {len(self.before.files)} files):")
            for line in self.before.freeze():
                self.transcript.write("    " + line)
            for root in self.roots + self.shallow:
                if root != self.marker_root and (ident := _identity(root)) is not None:
                    self.identity[str(root)] = ident
            self._save()
            if self.marker_root is not None:
                self._mark(self.marker_root)

    def _backup_path(self, original: str) -> Path:
        if self.backup_dir is None:
            if self.journal is not None:  # kept where a later run finds it after a kill -9
                from .guard import backup_dir_for

                self.backup_dir = backup_dir_for(self.journal)
                shutil.rmtree(self.backup_dir, ignore_errors=True)
                self.backup_dir.mkdir(parents=True)
            else:
                self.backup_dir = Path(tempfile.mkdtemp(prefix="mlprobe-restore-"))
        rel = original.lstrip("/\\").replace(":", "_")
        return self.backup_dir / rel

    def protect_file(self, path: Path, save: bool = True) -> None:
        """Before mlprobe writes or removes `path`: an existing file is saved, a new one is recorded;
        either way a rollback puts it back as it was."""
        p = _real_parent(str(path))
        if p in self.backups or p in self.made:
            return
        if not os.path.lexists(p):
            self.made.append(p)
            if save:
                self._save()
            return
        if self.new_venv is not None:
            return  # in a venv this install made: removed with it
        dest = self._backup_path(p)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dest, follow_symlinks=False)
        self.backups[p] = dest
        if save:
            self._save()

    def created(self, path: Path) -> None:
        """A file or folder this install makes outside its roots (a user-level kernel spec): removed
        on a rollback, by this process or by a recovery after a kill."""
        p = str(_real_parent(str(path)))
        if p not in self.outside:
            self.outside.append(p)
            self._save()

    def protect_dists(self, names: Iterable[str]) -> List[str]:
        """Save the files of these installed distributions (those the install would replace)."""
        if self.before is None:
            return []
        saved = []
        for name in names:
            key = str(canonicalize_name(name))
            if key not in self.before.dists:
                continue
            for f in self.before.dist_files.get(key, []):
                if os.path.isfile(f) or os.path.islink(f):
                    self.protect_file(Path(f), save=False)
            saved.append(f"{self.before.dists[key][0]}=={self.before.dists[key][1]}")
        self._save()
        if saved:
            self.transcript.note("saved for a rollback: " + ", ".join(saved))
        return saved

    # ------------------------------------------------------------------ after --------------
    def commit(self) -> None:
        self.committed = True
        self._unmark()
        self._forget()
        self._drop_backups()
        self.transcript.note("committed")

    def _drop_backups(self) -> None:
        if self.backup_dir is not None:
            shutil.rmtree(self.backup_dir, ignore_errors=True)
            self.backup_dir = None

    def rollback(self) -> RestoreReport:
        with NoInterrupt():
            try:
                refused = self._changed_since() if self.recovered else None
                if refused:
                    report = RestoreReport(ok=False, refused=refused)
                else:
                    report = self._rollback()
                    self._unmark()
            except Exception as exc:  # report, do not mask the original failure
                report = RestoreReport(ok=False, missing=[f"rollback error: {exc}"])
            self.transcript.note("rollback: " + report.summary())
            if report.ok:
                self._forget()
                self._drop_backups()
            elif self.backup_dir is not None:
                self.transcript.note(f"the saved files stay in {self.backup_dir}")
            self.report = report
            return report

    def _changed_since(self) -> Optional[str]:
        """Recovered from a journal: why the target is no longer what the dead install left (so that
        nothing may be touched), or None."""
        folders = [self.new_venv] if self.new_venv is not None else self.roots + self.shallow
        for folder in folders:
            assert folder is not None
            ident = self.identity.get(str(folder))
            now = _identity(folder)
            if folder == self.new_venv and now is None:
                continue  # gone already: nothing to remove
            if folder == self.new_venv and ident is None:
                if self.new_venv_was_empty_dir and folder.is_dir() and not any(folder.iterdir()):
                    continue
                return f"{folder} exists, but the interrupted install had not made it yet"
            if ident is not None and now != ident:
                return (f"{folder} is not the folder the interrupted install worked on "
                        "(it was re-created, or a link now points elsewhere)")
        if self.marked and self.marker_root is not None and _identity(self.marker_root) is not None:
            try:
                mark = (self.marker_root / MARKER).read_text(encoding="utf-8").strip()
            except OSError:
                mark = ""
            if mark != self.token:
                return f"{self.marker_root} no longer carries the mark of the interrupted install"
        return None

    def _remove_outside(self) -> None:
        for p in reversed(self.outside):
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.lexists(p):
                try:
                    os.unlink(p)
                except OSError:
                    pass

    def _recorded(self, scope: List[Path], dirs: Set[str], before_dirs: Set[str]) -> Set[str]:
        """The paths this install recorded: its journal's (files it wrote, the venv it made, its mark,
        the files it saved) and, for each distribution it was installing whose dist-info folder is new,
        the files that distribution's RECORD names inside the target."""
        named = set(self.made) | set(self.backups)
        if self.marker_root is not None:
            named.add(str(self.marker_root / MARKER))
        installing = dict(self.installing)
        if self.new_venv is not None:
            if self.venv_files is not None:
                named.update(self.venv_files)
            else:  # killed while `python -m venv` ran: its own layout (and ensurepip's pip by its RECORD)
                named.update(venv_layout(self.new_venv))
                installing.update({"pip": "", "setuptools": ""})
                self.venv_dirs = [str(self.new_venv / d) for d in ("bin", "Scripts", "include", "Include", "lib",
                                                                   "Lib")]
        for d in dirs:
            if not d.endswith(".dist-info") or d in before_dirs:
                continue
            name, version = dist_of(Path(d))
            if name is None or name not in installing or installing[name] not in ("", version):
                continue
            named.update(p for p in record_paths(Path(d)) if under(p, scope))
        return named

    def _rollback(self) -> RestoreReport:
        self._remove_outside()
        if self.new_venv is not None:
            path = self.new_venv
            if not os.path.lexists(path):
                return RestoreReport(ok=True, removed_venv=str(path), emptied_folder=self.new_venv_was_empty_dir)
            files, dirs = walk([path])
            named = self._recorded([path], dirs, set())
            removed = remove_recorded(files, named, {})
            remove_empty_dirs(dirs, set(), removed, set(self.venv_dirs), stop=str(path))
            kept = kept_files([path], {})
            if not kept and not self.new_venv_was_empty_dir:
                try:
                    path.rmdir()
                except OSError:
                    pass
            left = [p for p in named if os.path.lexists(p) and not os.path.isdir(p)]
            return RestoreReport(ok=not left, removed_venv=str(path), emptied_folder=self.new_venv_was_empty_dir,
                                 deleted_files=len(removed), kept=kept,
                                 missing=[f"{p} could not be removed" for p in left[:50]])
        if self.before is None:
            return RestoreReport(ok=True)
        before = self.before
        now_files, now_dirs = walk(self.roots, self.shallow)
        named = self._recorded(self.roots, now_dirs, before.dirs)
        removed = remove_recorded(now_files, named, before.files, self.backups)
        restored = 0
        for original, saved in self.backups.items():
            if os.path.lexists(original):
                continue  # never over a file that is there (removed above when it was the install's)
            try:
                os.makedirs(os.path.dirname(original), exist_ok=True)
                shutil.copy2(saved, original, follow_symlinks=False)
                restored += 1
            except OSError:
                continue
        remove_empty_dirs(now_dirs, before.dirs, removed, set())
        after = snapshot(self.env_python, self.roots, self.shallow) if self.env_python else EnvSnapshot()
        differs = sorted(set(before.freeze()) - set(after.freeze()))
        extra = sorted(set(after.freeze()) - set(before.freeze()))
        missing = [p for p in before.files if p not in after.files and not regenerable(p)]
        modified = [p for p, st in before.files.items()
                    if p in after.files and after.files[p] != st and p not in self.backups
                    and not regenerable(p)]
        kept = kept_files(self.roots, before.files, self.shallow)
        return RestoreReport(ok=not differs and not missing, deleted_files=len(removed), restored_files=restored,
                             freeze_differs=differs, missing=missing[:50], modified=modified[:50], kept=kept,
                             kept_packages=extra)

    # ------------------------------------------------------------------ context ------------
    def __enter__(self) -> "Transaction":
        self._save()  # before anything in the target changes
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> "Literal[False]":
        if exc_type is None:
            if not self.committed:
                self.commit()
            return False
        report = self.rollback()
        if not report.ok:
            what = exc.what if isinstance(exc, StageError) else (
                "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc))
            raise StageError(
                f"{what}; and the rollback could not finish",
                why=report.summary(),
                next_step=(f"the saved files are in {self.backup_dir}; "
                           if self.backup_dir else "") + "see the transcript log; recreate the environment",
                ref="E511", kind="failure",
            ) from exc
        return False


def unreadable_journal(path: Path, why: str, target: Optional[str] = None) -> StageError:
    """The one error for a journal mlprobe cannot read: `--recover` and `--apply` give the same."""
    of = f" of {target}" if target else ""
    return StageError(f"an interrupted install{of} left a journal mlprobe cannot read",
                      why=f"{path}: {why}",
                      next_step="nothing was rolled back or touched; check the environment it was installing "
                                f"into by hand (or recreate it), then delete {path}",
                      ref="E511", kind="failure")


def recover(target: str, say: Any = None, journal: Optional[Path] = None) -> Optional[str]:
    """Roll back an install of `target` that died mid-way (the caller holds the target's lock, so
    its owner is gone). Returns what was done, or None when there was nothing to recover. Refuses
    (E511, touching nothing) when the journal is unreadable or the target changed since."""
    from .guard import JOURNAL_VERSION, drop_journal, journal_path, read_journal
    from .proc import Transcript

    from .guard import read_journal_file

    path = journal or journal_path(target)
    found = read_journal_file(path) if journal else read_journal(target)
    if found is None:
        return None
    if found.broken:
        raise unreadable_journal(path, found.broken, target)
    if found.version != JOURNAL_VERSION:
        raise unreadable_journal(path, f"journal version {found.version!r}, this mlprobe "
                                       f"reads {JOURNAL_VERSION}", target)
    try:
        txn = Transaction.from_journal(found, Transcript(None))
    except JournalError as exc:
        raise unreadable_journal(path, str(exc), target) from None
    if say:
        say(f"rolling back an install of {target} that was interrupted (pid {found.pid})")
    report = txn.rollback()
    if report.refused:
        raise StageError(f"an interrupted install of {target} was not rolled back: the target changed since",
                         why=report.refused,
                         next_step="nothing was touched; check it by hand (its packages, your files)"
                                   + (f"; the files the install had saved are in {txn.backup_dir}"
                                      if txn.backup_dir else "")
                                   + f"; then delete {path} so that mlprobe forgets that install",
                         ref="E511", kind="failure")
    if not report.ok:
        raise StageError(f"an interrupted install of {target} could not be rolled back",
                         why=report.summary(),
                         next_step=(f"the saved files are in {txn.backup_dir}; " if txn.backup_dir else "")
                                   + f"recreate the environment, then delete {path}",
                         ref="E511", kind="failure")
    if journal is not None:
        journal.unlink(missing_ok=True)
    else:
        drop_journal(target)
    return f"rolled back an interrupted install of {target}: {report.summary()}"
