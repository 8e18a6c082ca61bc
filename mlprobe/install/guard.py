"""What keeps two installs, a `kill -9` or a closed terminal from losing a person's environment:

- one exclusive lock per target (a venv folder, or an interpreter for --system), taken before the
  target is even looked at, so two `install --apply` runs never both "create" the same venv;
- a journal per target, written before anything in the target changes and removed at commit or
  after a rollback: a journal found by a later run (or `mlprobe install --recover`) is an install
  that died mid-way, and it is rolled back before anything else happens;
- refusing system locations (/etc, /usr, C:\\Windows, …) as a venv unless forced.

The lock is filelock's (an OS-level lock: released by the kernel when the holder dies, so a stale
lock file never blocks). Locks and journals live in the user's cache folder, outside the target,
because a rollback may delete the target itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from ..errors import StageError
from ..model.jsontypes import JsonObject, JsonValue

JOURNAL_VERSION = 3  # 2: resolved paths, folder identities, a mark; 3: what it writes and installs (RECORDs)

# Folders a venv never belongs in. A path equal to one of these, or inside one, is refused unless
# --force; the exceptions are the usual writable places inside them.
_POSIX_SYSTEM = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
                 "/sbin", "/sys", "/usr", "/var", "/System", "/Library", "/private/etc", "/private/var")
_POSIX_ALLOWED = ("/usr/local", "/var/tmp", "/private/var/folders", "/private/var/tmp", "/var/folders")


def _home() -> Optional[Path]:
    """The home folder when it exists; None for HOME=/nonexistent (a service account), which mlprobe
    must not create."""
    if os.name != "nt" and not os.environ.get("HOME", "x").strip():
        return None  # HOME="" reads as "/" to Python: never make /.cache
    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError):
        return None
    if home == Path(home.anchor):
        return None  # a home folder that is the file system's root (service accounts): not mlprobe's to fill
    # Decided once per process: a child (pip asks `rustc --version`, and rustup makes ~/.rustup) may
    # create the home folder mid-way, and the lock, the journal and the log must stay in one place.
    key = str(home)
    if key not in _HOME_SEEN:
        _HOME_SEEN[key] = home.is_absolute() and home.is_dir()
    return home if _HOME_SEEN[key] else None


_HOME_SEEN: Dict[str, bool] = {}


def has_home() -> bool:
    return _home() is not None


def _private_temp() -> Path:
    """<temp>/mlprobe-<uid>: made 0700 by this user, refused when someone else owns it or it is a link."""
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"mlprobe-{uid}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    import stat as _stat

    if not _stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != uid) \
            or (os.name != "nt" and st.st_mode & 0o077):
        raise StageError(f"{folder} is not a private folder of this user",
                         why="HOME has no folder, so mlprobe keeps its logs and journals there",
                         next_step="set XDG_CACHE_HOME to a folder of yours", ref="E521", kind="usage")
    return folder


def cache_base() -> Path:
    """Where mlprobe keeps its own files: %LOCALAPPDATA%, $XDG_CACHE_HOME (an absolute path, as the XDG
    spec asks) or ~/.cache; when there is no home folder, a private folder in the temp folder."""
    if os.name == "nt":
        local = os.environ.get("LOCALAPPDATA")
        if local:
            return Path(local)
        home = _home()
        return home / "AppData" / "Local" if home else _private_temp()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg)
    home = _home()
    return home / ".cache" if home else _private_temp()


def private_dir(folder: Path) -> Path:
    """`folder` (and its missing parents) made; the last one only for this user (0700)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    if os.name != "nt":
        try:
            st = os.stat(folder)
            if st.st_uid == os.getuid() and st.st_mode & 0o077:
                os.chmod(folder, 0o700)
        except OSError:
            pass
    return folder


def state_dir() -> Path:
    return cache_base() / "mlprobe" / "transactions"


def target_key(target: str) -> str:
    """One name per target, whatever way the path was written (symlinks and .. resolved)."""
    norm = os.path.normcase(os.path.realpath(os.path.abspath(target)))
    return hashlib.sha256(norm.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def journal_path(target: str) -> Path:
    return state_dir() / f"{target_key(target)}.journal.json"


def backup_dir_for(target: str) -> Path:
    return state_dir() / f"{target_key(target)}.backup"


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def system_location(path: Path) -> Optional[str]:
    """The system folder `path` is (in), or None. Also the running interpreter's own prefix."""
    real = os.path.realpath(os.path.abspath(str(path)))
    for prefix in {sys.base_prefix, sys.prefix}:
        if prefix and os.path.normcase(real) == os.path.normcase(os.path.realpath(prefix)) \
                and not (Path(real) / "pyvenv.cfg").is_file():
            return prefix
    if os.name == "nt":
        low = real.lower()
        for var in ("SystemRoot", "ProgramFiles", "ProgramFiles(x86)", "ProgramData"):
            folder = os.environ.get(var)
            if folder and (low == folder.lower() or low.startswith(folder.lower().rstrip("\\") + "\\")):
                return folder
        if len(real) <= 3:  # a drive root
            return real
        return None
    if real == "/":
        return "/"
    if any(_under(real, ok) for ok in _POSIX_ALLOWED):
        return None
    for folder in _POSIX_SYSTEM:
        if _under(real, folder):
            return folder
    return None


def check_location(path: Path, force: bool) -> None:
    where = system_location(path)
    if where and not force:
        raise StageError(f"{path} is in a system location ({where})",
                         why="a virtual environment there would mix with files the operating system "
                               "or its package manager owns",
                         next_step="pick a folder of your own (e.g. --venv ~/venvs/NAME); "
                                     "add --force if you really mean that place",
                         ref="E519", kind="usage")


class TargetLock:
    """An exclusive lock on one install target; a second holder is refused at once, naming the first."""

    def __init__(self, target: str, key: Optional[str] = None) -> None:
        from filelock import FileLock

        self.target = target
        folder = private_dir(state_dir())
        key = key or target_key(target)
        self.path = folder / f"{key}.lock"
        self.info = folder / f"{key}.owner"
        self._lock = FileLock(str(self.path))

    def __enter__(self) -> "TargetLock":
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            owner = ""
            try:
                owner = self.info.read_text(encoding="utf-8").strip()
            except OSError:
                pass
            raise StageError(f"another mlprobe install is working on {self.target}",
                             why=(f"it holds the lock ({owner})" if owner else "it holds the lock"),
                             next_step="wait for it to finish, then run this again; or pick another --venv PATH",
                             ref="E520", kind="failure") from None
        try:
            self.info.write_text(f"pid {os.getpid()}, since {time.strftime('%H:%M:%S')}", encoding="utf-8")
        except OSError:
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.info.unlink()
        except OSError:
            pass
        self._lock.release()


# ---------------------------------------------------------------- the journal ------------------

def write_journal(target: str, doc: JsonObject) -> Path:
    """Atomically (write, fsync, rename): a journal is either the old one or the new one."""
    path = journal_path(target)
    private_dir(path.parent)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    data = json.dumps(dict(doc, journal_version=JOURNAL_VERSION, target=target, pid=os.getpid(),
                           written=time.time()))
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


@dataclass(frozen=True)
class Journal:
    """A journal file as read: the target it names and its fields (Transaction.from_journal reads
    them), or why it cannot be read (`broken`: not JSON, not an object naming its target)."""

    path: Path
    target: str = ""
    fields: JsonObject = field(default_factory=dict)
    alive_at: Optional[float] = None  # the file's last write
    broken: Optional[str] = None

    @property
    def version(self) -> JsonValue:
        return self.fields.get("journal_version")

    @property
    def pid(self) -> JsonValue:
        return self.fields.get("pid")


def _read(path: Path) -> Optional[Journal]:
    """The journal in `path`; None when there is none."""
    try:
        raw = path.read_bytes()
        alive = path.stat().st_mtime
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Journal(path, broken=str(exc))
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return Journal(path, broken=f"not JSON ({str(exc)[:120]}); truncated?")
    if not isinstance(doc, dict) or not isinstance(doc.get("target"), str) or not doc["target"]:
        return Journal(path, broken="not a journal object naming its target")
    return Journal(path, target=doc["target"], fields=doc, alive_at=alive)


def read_journal(target: str) -> Optional[Journal]:
    return _read(journal_path(target))


def read_journal_file(path: Path) -> Optional[Journal]:
    return _read(path)


def drop_journal(target: str) -> None:
    try:
        journal_path(target).unlink()
    except OSError:
        pass


def all_journals() -> Iterator[Journal]:
    """Every journal, the unreadable ones included (`broken` says why)."""
    folder = state_dir()
    if not folder.is_dir():
        return
    for p in sorted(folder.glob("*.journal.json")):
        journal = _read(p)
        if journal is not None:
            yield journal


def pending_targets() -> List[str]:
    return [j.target for j in all_journals() if not j.broken]
