"""PEP 751 lock files (`pylock.toml`): what an install put in place, every wheel with its URL or
path and sha256, and how to install exactly that again.

The data model and its checks are packaging's (`packaging.pylock`, packaging >= 26.1): mlprobe
builds `Pylock` objects, validates them, and writes their `to_dict()` as TOML. `pip lock` is not
used: it locks for the running interpreter and platform only (no --platform or --python-version)
and is experimental. Installing from a lock goes through a hashed requirements file
(`name==version --hash=sha256:…`, `--no-deps --require-hashes`), which every pip since 8 and uv
read; pip's own pylock reader is newer (26.x) than the pip a fresh venv often has.

The recommendation the lock was made for (recipe id, env vars, files, shims, verify) rides in
`[tool.mlprobe]`, so `mlprobe install --from-lock` sets up and verifies the same stack.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from packaging.tags import Tag, parse_tag
from packaging.utils import canonicalize_name

from ..errors import ParseError, StageError
from ..model.plan import Recommendation
from ..urls import strip_credentials

if TYPE_CHECKING:
    from typing_extensions import TypeGuard

LOCK_NAME = "pylock.toml"
CREATED_BY = "mlprobe"
MAX_LOCK_BYTES = 16 * 1024 * 1024

# The marker environment of an interpreter, as packaging.markers.default_environment() computes it,
# with the standard library only (the target interpreter may have no packaging).
ENVIRONMENT_SNIPPET = r"""
import json, os, platform, sys
def fmt(info):
    v = "%d.%d.%d" % (info.major, info.minor, info.micro)
    if info.releaselevel != "final":
        v += info.releaselevel[0] + str(info.serial)
    return v
print(json.dumps({"implementation_name": sys.implementation.name,
    "implementation_version": fmt(sys.implementation.version), "os_name": os.name,
    "platform_machine": platform.machine(), "platform_release": platform.release(),
    "platform_system": platform.system(), "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform}))
"""


@dataclass(frozen=True)
class LockEntry:
    """One distribution file to lock."""
    name: str
    version: str
    filename: str
    sha256: str
    url: Optional[str] = None
    path: Optional[str] = None  # relative to the lock file's folder (PEP 751)
    size: Optional[int] = None
    index: Optional[str] = None
    requested: bool = False


def _pylock() -> Any:
    try:
        from packaging import pylock
    except ImportError:
        import packaging

        raise StageError("this Python's packaging cannot read or write pylock.toml",
                         why=f"packaging {getattr(packaging, '__version__', '?')} has no pylock module",
                         next_step="python -m pip install --upgrade \"packaging>=26.1\" where mlprobe runs",
                         ref="E543", kind="unavailable") from None
    return pylock


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- pip's report ----------------

def entries_from_pip_report(text: str) -> List[LockEntry]:
    """pip's installation report (`--report`, format 1) -> one entry per distribution, with the
    file's URL and, where pip knew it, its sha256 ('' when not)."""
    start = text.find("{")
    try:
        doc = json.loads(text[start:]) if start >= 0 else None
    except ValueError as exc:
        raise ParseError(f"pip's report is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("install"), list):
        raise ParseError("pip's report has no 'install' list")
    out: List[LockEntry] = []
    for item in doc["install"]:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        name, version, url = meta.get("name"), meta.get("version"), info.get("url")
        if not (isinstance(name, str) and isinstance(version, str) and isinstance(url, str)):
            continue
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        digest = hashes.get("sha256") if isinstance(hashes, dict) else None
        if not digest:
            h = (info.get("archive_info") or {}).get("hash") or ""
            digest = h.split("=", 1)[1] if isinstance(h, str) and h.startswith("sha256=") else ""
        filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        out.append(LockEntry(name=name, version=version, filename=filename, sha256=str(digest), url=url,
                             requested=bool(item.get("requested"))))
    return out


def local_path(url: str) -> Optional[Path]:
    if url.startswith("file:"):
        return Path(url2pathname(urlsplit(url).path))
    return None


def fill_hash(entry: LockEntry, timeout: float = 120.0) -> LockEntry:
    """An entry with its sha256: given, read from a local file, or from the downloaded file."""
    if entry.sha256:
        return entry
    import dataclasses

    if entry.url:
        path = local_path(entry.url)
        if path is not None and path.is_file():
            return dataclasses.replace(entry, sha256=sha256_of(path), size=path.stat().st_size)
        if entry.url.startswith(("http://", "https://")):
            import requests

            h = hashlib.sha256()
            with requests.get(entry.url.split("#", 1)[0], stream=True, timeout=timeout) as r:
                r.raise_for_status()
                for chunk in r.iter_content(1 << 20):
                    h.update(chunk)
            return dataclasses.replace(entry, sha256=h.hexdigest())
    raise StageError(f"no sha256 for {entry.filename}", why="pip did not report one and the file cannot be read",
                     next_step="use a source that publishes hashes (PEP 503/691), or a --find-links folder",
                     ref="E531", kind="failure")


# ---------------------------------------------------------------- building and writing --------

# `[tool.mlprobe]` of a lock mlprobe writes: strings and lists of strings (keep.tool_table).
ToolTable = Dict[str, Union[str, List[str]]]


def build_lock(entries: Sequence[LockEntry], *, requires_python: Optional[str] = None,
               environments: Sequence[str] = (), tool: Optional[ToolTable] = None) -> Any:
    """A validated packaging.pylock.Pylock of these files (one package per name and version)."""
    pl = _pylock()
    from packaging.markers import Marker
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    by_key: Dict[Tuple[str, str], List[LockEntry]] = {}
    for e in entries:
        by_key.setdefault((str(canonicalize_name(e.name)), e.version), []).append(e)
    packages = []
    for (name, version), files in sorted(by_key.items()):
        wheels, sdist = [], None
        for f in files:
            if not f.sha256:
                raise StageError(f"no sha256 for {f.filename}", ref="E531", kind="failure")
            if f.filename.endswith(".whl"):
                wheels.append(pl.PackageWheel(name=f.filename, url=strip_credentials(f.url), path=f.path,
                                              size=f.size, hashes={"sha256": f.sha256}))
            else:
                sdist = pl.PackageSdist(name=f.filename, url=strip_credentials(f.url), path=f.path, size=f.size,
                                        hashes={"sha256": f.sha256})
        packages.append(pl.Package(name=name, version=Version(version), index=strip_credentials(files[0].index),
                                   wheels=wheels or None, sdist=sdist))
    lock = pl.Pylock(lock_version=Version("1.0"), created_by=CREATED_BY, packages=packages,
                     requires_python=SpecifierSet(requires_python) if requires_python else None,
                     environments=[Marker(m) for m in environments] or None,
                     tool={"mlprobe": dict(tool)} if tool else None)
    try:
        lock.validate()
    except pl.PylockValidationError as exc:
        raise StageError("the lock mlprobe made does not validate", why=str(exc),
                         next_step="report this with the transcript log", ref="E531", kind="failure") from None
    return lock


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k, ensure_ascii=False)


def _scalar(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # JSON's escapes are TOML basic-string escapes
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


def _is_table_list(v: object) -> "TypeGuard[Sequence[Mapping[str, object]]]":
    return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, Mapping) for x in v)


def _emit(path: List[str], table: Mapping[str, object], out: List[str]) -> None:
    """A TOML table as packaging's Pylock.to_dict() gives it (its values are whatever packaging puts
    there: each is narrowed here)."""
    for k, v in table.items():
        if not isinstance(v, Mapping) and not _is_table_list(v):
            out.append(f"{_key(k)} = {_scalar(v)}")
    for k, v in table.items():
        if isinstance(v, Mapping):
            only_tables = bool(v) and all(isinstance(x, Mapping) or _is_table_list(x) for x in v.values())
            if not only_tables:  # a table of tables needs no header of its own
                out.append("")
                out.append("[" + ".".join(_key(p) for p in path + [k]) + "]")
            _emit(path + [k], v, out)
        elif _is_table_list(v):
            for item in v:
                out.append("")
                out.append("[[" + ".".join(_key(p) for p in path + [k]) + "]]")
                _emit(path + [k], item, out)


def dumps(lock: Any) -> str:
    """TOML for a Pylock (the subset PEP 751 uses: strings, integers, booleans, arrays of strings,
    tables and arrays of tables); `read_lock` reads it back through tomllib and packaging."""
    out: List[str] = []
    _emit([], lock.to_dict(), out)
    return "\n".join(out).lstrip("\n") + "\n"


def write_lock(path: Path, lock: Any) -> Path:
    text = dumps(lock)
    loads_toml(text)  # what was written reads back
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


# ---------------------------------------------------------------- reading ---------------------

def loads_toml(text: str) -> Dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib  # novm: tomli below
    else:  # pragma: no cover - Python 3.9/3.10
        try:
            import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]
        except ImportError:
            raise StageError("reading pylock.toml needs tomli on Python < 3.11",
                             next_step="python -m pip install tomli", ref="E543", kind="unavailable") from None
    doc = tomllib.loads(text)
    assert isinstance(doc, dict)
    return doc


def read_lock(path: Path) -> Any:
    """A lock file -> a validated Pylock. E532 (usage) when it is not one, saying why."""
    pl = _pylock()
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_LOCK_BYTES + 1)
        if len(raw) > MAX_LOCK_BYTES:
            raise ValueError(f"larger than {MAX_LOCK_BYTES >> 20} MiB")
        doc = loads_toml(raw.decode("utf-8"))
        return pl.Pylock.from_dict(doc)
    except StageError:
        raise
    except (OSError, ValueError, pl.PylockValidationError) as exc:  # TOMLDecodeError is a ValueError
        raise StageError(f"cannot read the lock file {path}", why=f"{type(exc).__name__}: {exc}",
                         next_step="pass a pylock.toml written by `mlprobe install --apply` or "
                                   "`mlprobe bundle` (PEP 751, lock-version 1.x)",
                         ref="E532", kind="usage") from None


def recommendation_text(rec: Recommendation) -> str:
    """The recommendation as `[tool.mlprobe] recommendation` holds it (`recommendation_of` reads it)."""
    return json.dumps(rec.to_json(), sort_keys=True)


def recommendation_of(lock: Any) -> Optional[Recommendation]:
    """The recommendation a lock written by mlprobe carries (E513 when it is not one mlprobe can
    install); None for a lock without one (another tool's)."""
    tool = lock.tool.get("mlprobe") if isinstance(lock.tool, Mapping) else None
    raw = tool.get("recommendation") if isinstance(tool, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    from .steps import recommendation_from_file

    return recommendation_from_file(doc)


def select(lock: Any, environment: Mapping[str, str], tags: Sequence[str]) -> List[Tuple[Any, Any]]:
    """(package, wheel or sdist) to install for that interpreter (PEP 751's selection, packaging's
    implementation). E533 when the lock is for another Python or platform, naming the tags."""
    pl = _pylock()
    parsed: List[Tag] = []
    for t in tags:
        parsed.extend(parse_tag(t))
    try:
        return list(lock.select(environment=dict(environment), tags=parsed))
    except (pl.PylockSelectError, ValueError, KeyError) as exc:  # UndefinedEnvironmentName is a ValueError
        shown = ", ".join(list(tags)[:4]) + (", …" if len(tags) > 4 else "")
        raise StageError("the lock does not fit the target interpreter", why=f"{exc} (its tags: {shown})",
                         next_step="make the lock for this machine: `mlprobe bundle --replay REPORT` with "
                                   "this machine's report, or pick its Python with --python X.Y",
                         ref="E533", kind="unavailable") from None


def hashed_requirements(selected: Iterable[Tuple[Any, Any]]) -> List[str]:
    """Requirement lines pinning each selected file by name, version and sha256 (pip and uv
    check the hashes; a file of the same version with another hash is refused)."""
    lines = []
    for package, dist in selected:
        digest = (dist.hashes or {}).get("sha256")
        if not digest or package.version is None:
            raise StageError(f"{package.name} has no version or sha256 in the lock", ref="E532", kind="usage",
                             next_step="use a lock with a version and a sha256 for every file")
        lines.append(f"{package.name}=={package.version} --hash=sha256:{digest}")
    return lines


def environment_of(python: str, timeout: float = 60.0) -> Dict[str, str]:
    from .proc import python_quiet_env, run_quiet

    cp = run_quiet([python, "-I", "-c", ENVIRONMENT_SNIPPET], timeout=timeout, env=python_quiet_env())
    if cp.returncode != 0:
        raise StageError(f"cannot read the marker environment of {python}", why=cp.stderr.strip()[-300:],
                         next_step="check that this interpreter starts", ref="E542", kind="failure")
    doc = json.loads(cp.stdout.strip().splitlines()[-1])
    return {str(k): str(v) for k, v in doc.items()}
