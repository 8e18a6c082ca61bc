"""What `install --apply` leaves behind so the chosen build stays and can be made again: the pins
(pin.py) and a PEP 751 lock of what it installed (lock.py), and installing from such a lock.

apply() calls lift_pins() before installing (a venv mlprobe pinned before would refuse the new
build: the old pins are lifted inside the transaction, so a failure puts them back), pin_installed()
after the import check, and lock_installed() once the transaction is committed (a lock that cannot
be written is said, and does not undo a working install).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..errors import ParseError, StageError
from . import lock as locks
from . import pin as pins
from .backends import COMMON_PIP, Sources, pip_env, source_args
from .proc import Transcript, run_quiet
from .transaction import Transaction
from .venv import list_distributions

if TYPE_CHECKING:
    from concurrent.futures import Future

    from .resolve import ResolvedDist
    from .steps import InstallPlan

LOCK_TIMEOUT_S = 600.0


def _installed(python: str) -> Dict[str, Tuple[str, str]]:
    return {str(canonicalize_name(d.name)): (d.name, d.version) for d in list_distributions(python)}


class Queries:
    """What the pins and the lock ask of the environment once the packages are in (its distributions,
    its marker environment, the constraint files pip's configuration names): each a start of an
    interpreter, asked at once in the background while the import check runs, and each asked the
    moment it is needed when it was not started (or failed: its own error is then raised there)."""

    def __init__(self, python: str, pip_cmd: Sequence[str]) -> None:
        self.python, self.pip_cmd = python, list(pip_cmd)
        self._futures: Dict[str, "Future[Any]"] = {}

    def start(self) -> "Queries":
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="mlprobe-after-install")
        self._futures = {"installed": pool.submit(_installed, self.python),
                         "environment": pool.submit(locks.environment_of, self.python),
                         "inherited": pool.submit(inherited_constraints, self.python, self.pip_cmd)}
        pool.shutdown(wait=False)
        return self

    def _get(self, key: str, ask: "Callable[[], Any]") -> Any:
        fut = self._futures.pop(key, None)
        if fut is not None:
            try:
                return fut.result()
            except Exception:  # asked again below, where its error (if any) is raised as usual
                pass
        return ask()

    def installed(self) -> Dict[str, Tuple[str, str]]:
        out: Dict[str, Tuple[str, str]] = self._get("installed", lambda: _installed(self.python))
        self._futures["installed"] = _done(out)  # the lock asks again, after the pins: nothing changed
        return out

    def environment(self) -> Dict[str, str]:
        out: Dict[str, str] = self._get("environment", lambda: locks.environment_of(self.python))
        return out

    def inherited(self) -> Tuple[List[str], Optional[str]]:
        out: Tuple[List[str], Optional[str]] = self._get(
            "inherited", lambda: inherited_constraints(self.python, self.pip_cmd))
        return out


def _done(value: Any) -> "Future[Any]":
    from concurrent.futures import Future

    f: "Future[Any]" = Future()
    f.set_result(value)
    return f


def lift_pins(venv: Path, txn: Transaction, transcript: Transcript) -> List[str]:
    """A venv pinned before: its pins are saved (for a rollback) and lifted for this install."""
    if pins.read_pins(venv) is None:
        return []
    for f in pins.pin_files(venv):
        txn.protect_file(f)
    done = pins.unpin(venv)
    transcript.note("the pins of an earlier install lifted for this one: " + "; ".join(done))
    return done


def _index_of(plan: "InstallPlan") -> Optional[str]:
    """Where the install took its wheels from, for the pins file's `# from` comment: the index, the
    --find-links folders (as file: URLs) without an index, or pip's configuration."""
    s = plan.sources
    if s.use_pip_config:
        return "pip's configuration" + (" and " + " ".join(_link(d) for d in s.find_links) if s.find_links else "")
    if s.no_index:
        return " ".join(_link(d) for d in s.find_links) or None
    return plan.recipe_index_url or s.index_url


def _link(d: str) -> str:
    return d if "://" in d else pins.file_url(Path(d))


def inherited_constraints(python: str, pip_cmd: Sequence[str]) -> Tuple[List[str], Optional[str]]:
    """The constraint files pip's configuration names for this interpreter (kept beside the pins),
    and PIP_CONSTRAINT when set (it wins over any file)."""
    try:
        cp = run_quiet([*pip_cmd, "config", "list"], timeout=60.0, env=pip_env(Sources(use_pip_config=True)))
    except (OSError, subprocess.SubprocessError):
        return [], None
    return pins.constraint_values(cp.stdout) if cp.returncode == 0 else ([], None)


def pin_installed(plan: "InstallPlan", python: str, venv: Path, pip_cmd: Sequence[str], txn: Transaction,
                  transcript: Transcript, queries: Optional[Queries] = None) -> Tuple[pins.PinSet, List[str]]:
    """Pin the recipe's distributions as installed now. Returns the pins and remarks for the person."""
    for f in pins.pin_files(venv):
        txn.protect_file(f)
    q = queries or Queries(python, pip_cmd)
    installed = q.installed()
    chosen = pins.choose_pins(plan.packages, installed, _index_of(plan))
    inherited, env_value = q.inherited()
    pinset = pins.write_pins(venv, chosen, plan.recipe, inherited)
    remarks = []
    if inherited:
        remarks.append("the constraint files pip's configuration named are kept beside the pins: "
                       + " ".join(inherited))
    if env_value is not None:
        remarks.append(f"PIP_CONSTRAINT is set ({env_value}): while it is, pip reads it instead of the pins")
    if " " in str(venv):
        remarks.append("the venv's path has a space: uv and pip get the pins file as a file: URL")
    transcript.note(f"pinned in {pinset.file}: " + ", ".join(p.requirement for p in pinset.pins))
    return pinset, remarks


def _report_argv(pip_cmd: Sequence[str], requirements: Sequence[str], sources: Sources) -> List[str]:
    return [*pip_cmd, "install", "--dry-run", "--report", "-", "--quiet", "--ignore-installed", "--no-deps",
            *COMMON_PIP, *source_args(sources), *requirements]


def lock_installed(plan: "InstallPlan", python: str, names: Sequence[str], pip_cmd: Sequence[str],
                   dest: Path, transcript: Transcript) -> Path:
    """Write a pylock.toml of the distributions `names` as installed in `python` now: pip is asked
    once more (dry run, --no-deps, exact versions, the same sources) for each file's URL and hash."""
    installed = _installed(python)
    wanted = [installed[str(canonicalize_name(n))] for n in names if str(canonicalize_name(n)) in installed]
    if not wanted:
        raise StageError("nothing to lock", why="none of the resolved distributions is installed",
                         ref="E531", kind="failure")
    argv = _report_argv(pip_cmd, [f"{n}=={v}" for n, v in wanted], plan.sources)
    if plan.lock_requirements:  # installed from a lock: the same hashed files again
        argv = _report_argv(pip_cmd, ["-r", plan.lock_requirements], plan.sources)
    cp = run_quiet(argv, timeout=LOCK_TIMEOUT_S, env=pip_env(plan.sources))
    if cp.returncode != 0:
        last = (cp.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise StageError("pip could not say where the installed files came from", why=last, ref="E531",
                         kind="failure")
    try:
        entries = locks.entries_from_pip_report(cp.stdout)
    except ParseError as exc:
        raise StageError("pip's report of the installed files is unreadable", why=str(exc), ref="E531",
                         kind="failure") from None
    index = _index_of(plan)
    import dataclasses

    entries = [dataclasses.replace(locks.fill_hash(e), index=index) for e in entries]
    env = locks.environment_of(python)
    lock = locks.build_lock(entries, requires_python=f"=={env['python_version']}.*",
                            environments=[environment_marker(env)], tool=tool_table(plan, env))
    out = locks.write_lock(dest, lock)
    transcript.note(f"lock written: {out} ({len(entries)} files)")
    return out


def lock_resolved(plan: "InstallPlan", python: str, dists: Sequence["ResolvedDist"], dest: Path,
                  transcript: Transcript, queries: Optional[Queries] = None) -> Path:
    """Write a pylock.toml of the resolution that was installed, from the resolver's own URLs, sha256
    and sizes (no second question to pip; a hash is computed only for a file no resolver hashed).
    Each distribution must be installed at the resolved version (E531 when not)."""
    import dataclasses

    q = queries or Queries(python, [])
    installed = q.installed()
    missing = [f"{d.name}=={d.version}" for d in dists
               if installed.get(str(canonicalize_name(d.name)), ("", ""))[1] != d.version]
    if missing:
        raise StageError("what is installed is not what was resolved", why="not installed as resolved: "
                         + ", ".join(missing[:6]), ref="E531", kind="failure")
    index = _index_of(plan)
    entries = []
    for d in dists:
        if not d.url:
            raise StageError(f"no URL for {d.name} {d.version} in the resolution", ref="E531", kind="failure")
        filename = d.filename or unquote(urlsplit(d.url).path.rsplit("/", 1)[-1])
        entry = locks.LockEntry(name=d.name, version=d.version, filename=filename, sha256=d.sha256 or "",
                                url=d.url.split("#", 1)[0], size=d.size, index=index, requested=d.requested)
        if not entry.sha256:
            filled = locks.fill_hash(entry)
            entry = dataclasses.replace(filled, size=entry.size or filled.size)
        entries.append(entry)
    env = q.environment()
    lock = locks.build_lock(entries, requires_python=f"=={env['python_version']}.*",
                            environments=[environment_marker(env)], tool=tool_table(plan, env))
    out = locks.write_lock(dest, lock)
    transcript.note(f"lock written from the resolution: {out} ({len(entries)} files)")
    return out


def environment_marker(env: Dict[str, str]) -> str:
    return (f"sys_platform == {json.dumps(env['sys_platform'])} and platform_machine == "
            f"{json.dumps(env['platform_machine'])} and implementation_name == "
            f"{json.dumps(env['implementation_name'])}")


def tool_table(plan: "InstallPlan", env: Mapping[str, str], extra: Optional[locks.ToolTable] = None) -> locks.ToolTable:
    """`[tool.mlprobe]` of the lock: the recipe, who made it when, the sources and the recommendation."""
    from .. import __version__

    t: locks.ToolTable = {"recipe": plan.recipe, "mlprobe-version": __version__,
                         "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                         "python": env.get("python_full_version", ""),
                         "sources": plan.sources.describe()}
    if plan.recommendation is not None:
        t["recommendation"] = locks.recommendation_text(plan.recommendation)
    t.update(extra or {})
    return t


# ---------------------------------------------------------------- installing from a lock -------

def requirements_from_lock(path: Path, python: str, tags: Sequence[str]) -> Tuple[Path, Any, List[str]]:
    """Read the lock, select its files for `python` (its marker environment and `tags`), and
    write them as a hashed requirements file. Returns (that file, the lock, the lines)."""
    lock = locks.read_lock(path)
    env = locks.environment_of(python)
    lines = locks.hashed_requirements(locks.select(lock, env, tags))
    fd, name = tempfile.mkstemp(prefix="mlprobe-lock-", suffix=".txt")
    with open(fd, "w", encoding="utf-8") as fh:
        fh.write(f"# from {path}\n" + "\n".join(lines) + "\n")
    return Path(name), lock, lines


def lock_requirement_names(lines: Sequence[str]) -> List[str]:
    out = []
    for ln in lines:
        try:
            out.append(Requirement(ln.split(" --hash", 1)[0]).name)
        except InvalidRequirement:
            continue
    return out


def running_pip() -> List[str]:
    return [sys.executable, "-m", "pip"]
