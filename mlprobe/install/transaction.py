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
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Dict, Iterable, List, Literal, Optional, Set, Tuple, Type

from packaging.utils import canonicalize_name

from ..errors import StageError
from .proc import NoInterrupt, Transcript, python_quiet_env, run_quiet

_DISTS = r"""
import json, sys
try:
    import importlib.metadata as md
except ImportError:
    print("[]"); sys.exit(0)
out, seen = [], set()
for d in md.distributions():
    try:
        name = d.metadata["Name"]
    except Exception:
        name = None
    if not name:
        continue
    key = name.lower().replace("_", "-").replace(".", "-")
    if key in seen:
        continue
    seen.add(key)
    try:
        files = [str(d.locate_file(f)) for f in (d.files or [])]
    except Exception:
        files = []
    out.append({"name": name, "version": d.version, "files": files,
                "path": str(getattr(d, "_path", ""))})
print(json.dumps(out))
"""

FileState = Tuple[int, int]  # size, mtime_ns


@dataclass
class EnvSnapshot:
    dists: Dict[str, Tuple[str, str]] = field(default_factory=dict)  # canonical name -> (name, version)
    dist_files: Dict[str, List[str]] = field(default_factory=dict)
    files: Dict[str, FileState] = field(default_factory=dict)
    dirs: Set[str] = field(default_factory=set)

    def freeze(self) -> List[str]:
        return sorted(f"{n}=={v}" for n, v in self.dists.values())


def list_distributions(python: str, timeout: float = 120.0) -> List[Dict[str, Any]]:
    cp = run_quiet([python, "-I", "-c", _DISTS], timeout=timeout, env=python_quiet_env())
    if cp.returncode != 0:
        raise StageError(f"cannot list the packages of {python}", why=cp.stderr.strip()[-300:],
                         next_step="check that this interpreter starts", ref="E511")
    doc = json.loads(cp.stdout.strip().splitlines()[-1])
    return doc if isinstance(doc, list) else []


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


def snapshot(python: str, roots: List[Path], shallow: Iterable[Path] = ()) -> EnvSnapshot:
    snap = EnvSnapshot()
    for d in list_distributions(python):
        key = str(canonicalize_name(d["name"]))
        snap.dists[key] = (d["name"], d["version"])
        snap.dist_files[key] = list(d.get("files") or [])
    snap.files, snap.dirs = walk(roots, shallow)
    return snap


def _regenerable(path: str) -> bool:
    return path.endswith((".pyc", ".pyo")) or f"{os.sep}__pycache__" in path


@dataclass
class RestoreReport:
    ok: bool
    removed_venv: Optional[str] = None
    deleted_files: int = 0
    restored_files: int = 0
    freeze_differs: List[str] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    modified: List[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.removed_venv:
            return f"removed the half-made environment {self.removed_venv}"
        if self.ok:
            return (f"environment restored: {self.deleted_files} new file(s) removed, {self.restored_files} "
                    "saved file(s) put back; its packages are as before")
        return "environment NOT fully restored: " + "; ".join(
            x for x in (
                f"packages differ: {', '.join(self.freeze_differs[:8])}" if self.freeze_differs else "",
                f"{len(self.missing)} file(s) missing, e.g. {self.missing[0]}" if self.missing else "",
                f"{len(self.modified)} file(s) changed, e.g. {self.modified[0]}" if self.modified else "",
            ) if x)


class Transaction:
    """with Transaction(...) as txn: create/modify; an exception (KeyboardInterrupt included) rolls
    back, then propagates (or becomes E511 when the rollback itself could not finish)."""

    def __init__(self, transcript: Transcript, *, env_python: Optional[str] = None,
                 roots: Optional[List[Path]] = None, new_venv: Optional[Path] = None,
                 new_venv_was_empty_dir: bool = False, shallow: Optional[List[Path]] = None,
                 journal: Optional[str] = None) -> None:
        self.transcript = transcript
        self.journal = journal  # the target whose journal (guard.py) records this transaction
        self.env_python = env_python
        self.roots = roots or []
        self.shallow = shallow or []
        self.new_venv = new_venv
        self.new_venv_was_empty_dir = new_venv_was_empty_dir
        self.before: Optional[EnvSnapshot] = None
        self.backup_dir: Optional[Path] = None
        self.backups: Dict[str, Path] = {}
        self.report: Optional[RestoreReport] = None
        self.committed = False
        self.recovered = False  # rebuilt from a journal after the process that made it died

    # ------------------------------------------------------------------ journal ------------
    def to_journal(self) -> Dict[str, Any]:
        before = None
        if self.before is not None:
            before = {"dists": self.before.dists, "files": self.before.files, "dirs": sorted(self.before.dirs)}
        return {"new_venv": str(self.new_venv) if self.new_venv else None,
                "new_venv_was_empty_dir": self.new_venv_was_empty_dir, "env_python": self.env_python,
                "roots": [str(r) for r in self.roots], "shallow": [str(r) for r in self.shallow],
                "backup_dir": str(self.backup_dir) if self.backup_dir else None,
                "backups": {k: str(v) for k, v in self.backups.items()}, "before": before}

    @classmethod
    def from_journal(cls, doc: Dict[str, Any], transcript: Transcript) -> "Transaction":
        txn = cls(transcript, env_python=doc.get("env_python"), roots=[Path(r) for r in doc.get("roots") or []],
                  new_venv=Path(doc["new_venv"]) if doc.get("new_venv") else None,
                  new_venv_was_empty_dir=bool(doc.get("new_venv_was_empty_dir")),
                  shallow=[Path(r) for r in doc.get("shallow") or []], journal=doc.get("target"))
        before = doc.get("before")
        if isinstance(before, dict):
            txn.before = EnvSnapshot(
                dists={k: (v[0], v[1]) for k, v in (before.get("dists") or {}).items()},
                files={k: (int(v[0]), int(v[1])) for k, v in (before.get("files") or {}).items()},
                dirs=set(before.get("dirs") or []))
        txn.backup_dir = Path(doc["backup_dir"]) if doc.get("backup_dir") else None
        txn.backups = {k: Path(v) for k, v in (doc.get("backups") or {}).items()}
        txn.recovered = True
        return txn

    def _save(self) -> None:
        if self.journal is not None and not self.committed:
            from .guard import write_journal

            write_journal(self.journal, self.to_journal())

    def _forget(self) -> None:
        if self.journal is not None:
            from .guard import drop_journal

            drop_journal(self.journal)

    # ------------------------------------------------------------------ before -------------
    def begin(self) -> None:
        if self.env_python and self.new_venv is None:
            self.before = snapshot(self.env_python, self.roots, self.shallow)
            self.transcript.note("snapshot of the environment before installing "
                                 f"({len(self.before.dists)} distributions, {len(self.before.files)} files):")
            for line in self.before.freeze():
                self.transcript.write("    " + line)
            self._save()

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
        p = str(path)
        if self.new_venv is not None or p in self.backups or not os.path.lexists(p):
            return
        dest = self._backup_path(p)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dest, follow_symlinks=False)
        self.backups[p] = dest
        if save:
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
                report = self._rollback()
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

    def _rollback(self) -> RestoreReport:
        if self.new_venv is not None:
            path = self.new_venv
            if self.recovered and path.is_dir() and not (path / "pyvenv.cfg").is_file() and any(path.iterdir()):
                # found after a crash: only what mlprobe was making is removed, nothing put there since
                return RestoreReport(ok=False, missing=[f"{path} is no longer the venv mlprobe was making: "
                                                        "left as it is"])
            if self.new_venv_was_empty_dir:
                for child in list(path.iterdir()) if path.is_dir() else []:
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink()
            else:
                shutil.rmtree(path, ignore_errors=True)
            gone = not path.exists() or (self.new_venv_was_empty_dir and not any(path.iterdir()))
            return RestoreReport(ok=gone, removed_venv=str(path),
                                 missing=[] if gone else [f"{path} could not be removed"])
        if self.before is None:
            return RestoreReport(ok=True)
        before = self.before
        now_files, now_dirs = walk(self.roots, self.shallow)
        deleted = 0
        for p in now_files:
            if p not in before.files:
                try:
                    os.unlink(p)
                    deleted += 1
                except OSError:
                    pass
        for d in sorted(now_dirs - before.dirs, key=len, reverse=True):
            shutil.rmtree(d, ignore_errors=True)
        restored = 0
        for original, saved in self.backups.items():
            try:
                os.makedirs(os.path.dirname(original), exist_ok=True)
                if os.path.lexists(original) and not os.path.isdir(original):
                    os.unlink(original)
                shutil.copy2(saved, original, follow_symlinks=False)
                restored += 1
            except OSError:
                continue
        after = snapshot(self.env_python, self.roots, self.shallow) if self.env_python else EnvSnapshot()
        differs = sorted(set(before.freeze()) ^ set(after.freeze()))
        missing = [p for p in before.files if p not in after.files and not _regenerable(p)]
        modified = [p for p, st in before.files.items()
                    if p in after.files and after.files[p] != st and p not in self.backups
                    and not _regenerable(p)]
        return RestoreReport(ok=not differs and not missing, deleted_files=deleted, restored_files=restored,
                             freeze_differs=differs, missing=missing[:50], modified=modified[:50])

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


def recover(target: str, say: Any = None) -> Optional[str]:
    """Roll back an install of `target` that died mid-way (the caller holds the target's lock, so
    its owner is gone). Returns what was done, or None when there was nothing to recover."""
    from .guard import JOURNAL_VERSION, drop_journal, journal_path, read_journal
    from .proc import Transcript

    doc = read_journal(target)
    if doc is None:
        return None
    if doc.get("broken") or doc.get("journal_version") != JOURNAL_VERSION:
        raise StageError(f"an interrupted install of {target} left a journal mlprobe cannot read",
                         why=str(journal_path(target)),
                         next_step="check the environment by hand (or recreate it), then delete that file",
                         ref="E511", kind="failure")
    if say:
        say(f"rolling back an install of {target} that was interrupted (pid {doc.get('pid')})")
    txn = Transaction.from_journal(doc, Transcript(None))
    report = txn.rollback()
    if not report.ok:
        raise StageError(f"an interrupted install of {target} could not be rolled back",
                         why=report.summary(),
                         next_step=f"the saved files are in {doc.get('backup_dir')}; recreate the environment",
                         ref="E511", kind="failure")
    drop_journal(target)
    return f"rolled back an interrupted install of {target}: {report.summary()}"
