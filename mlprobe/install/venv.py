"""Interpreters and virtual environments: find python X.Y, ask an interpreter about itself, create
or reuse a venv, and refuse a system interpreter that PEP 668 marks as externally managed."""

from __future__ import annotations

import json
import errno
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

from ..errors import StageError
from .proc import python_quiet_env, run_quiet

# Run with the target interpreter (-I: no user site, no cwd on sys.path). Standard library only.
_INSPECT = r"""
import json, os, sys, sysconfig, importlib.util, struct
in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
stdlib = sysconfig.get_path("stdlib") or ""
print(json.dumps({
  "executable": sys.executable,
  "version": "%d.%d.%d" % sys.version_info[:3],
  "implementation": sys.implementation.name,
  "prefix": sys.prefix,
  "base_prefix": getattr(sys, "base_prefix", sys.prefix),
  "in_venv": in_venv,
  "externally_managed": (not in_venv) and os.path.isfile(os.path.join(stdlib, "EXTERNALLY-MANAGED")),
  "stdlib": stdlib,
  "purelib": sysconfig.get_path("purelib"),
  "platlib": sysconfig.get_path("platlib"),
  "scripts": sysconfig.get_path("scripts"),
  "has_pip": importlib.util.find_spec("pip") is not None,
  "abiflags": getattr(sys, "abiflags", ""),
  "gil_disabled": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
  "platform": sysconfig.get_platform(),
  "pointer_bits": struct.calcsize("P") * 8,
}))
"""


# Every distribution of an interpreter: name, version and files (list_distributions).
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


@dataclass(frozen=True)
class Interpreter:
    executable: str
    version: str
    implementation: str
    prefix: str
    base_prefix: str
    in_venv: bool
    externally_managed: bool
    stdlib: str
    purelib: str
    platlib: str
    scripts: str
    has_pip: bool
    abiflags: str = ""
    gil_disabled: bool = False
    platform: str = ""
    pointer_bits: int = 64

    @property
    def major_minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


class InstalledDist(NamedTuple):
    """A distribution installed in an interpreter (what `pip freeze` lists), and its files."""

    name: str
    version: str  # "" when its metadata names none
    files: Tuple[str, ...]


def list_distributions(python: str, timeout: float = 120.0) -> List[InstalledDist]:
    """The distributions of `python`, read once from the JSON line _DISTS prints."""
    cp = run_quiet([python, "-I", "-c", _DISTS], timeout=timeout, env=python_quiet_env())
    if cp.returncode != 0:
        raise StageError(f"cannot list the packages of {python}", why=cp.stderr.strip()[-300:],
                         next_step="check that this interpreter starts", ref="E542")
    doc = json.loads(cp.stdout.strip().splitlines()[-1])
    out = []
    for d in doc if isinstance(doc, list) else []:
        name = d.get("name") if isinstance(d, dict) else None
        if isinstance(name, str) and name:
            version, files = d.get("version"), d.get("files")
            out.append(InstalledDist(name, version if isinstance(version, str) else "",
                                     tuple(f for f in files if isinstance(f, str)) if isinstance(files, list) else ()))
    return out


def inspect_interpreter(python: str, timeout: float = 30.0) -> Interpreter:
    try:
        cp = run_quiet([python, "-I", "-c", _INSPECT], timeout=timeout, env=python_quiet_env())
        text = cp.stdout.strip()
        doc = json.loads(text.splitlines()[-1]) if cp.returncode == 0 and text else None
    except (OSError, ValueError, IndexError) as exc:
        doc, cp_err = None, str(exc)
    else:
        cp_err = (cp.stderr or "").strip()[-300:]
    if not isinstance(doc, dict):
        raise StageError(
            f"cannot run the interpreter {python}",
            why=cp_err or "it did not answer",
            next_step="pass another one with --python X.Y, or check that it starts",
            ref="E510", kind="unavailable",
        )
    fields = Interpreter.__dataclass_fields__
    return Interpreter(**{k: v for k, v in doc.items() if k in fields})


def _runs_as(candidate: str, version: str) -> bool:
    """Does this interpreter start, and is it that X.Y? (pyenv shims exist for versions that are not
    selected and then fail.)"""
    try:
        cp = run_quiet([candidate, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                       timeout=20, env=python_quiet_env())
    except (OSError, Exception):
        return False
    return cp.returncode == 0 and cp.stdout.strip() == version


def _candidates(version: str) -> List[str]:
    out: List[str] = []
    names = [f"python{version}"] + ([f"python{version.replace('.', '')}"] if os.name == "nt" else [])
    for name in names:
        found = shutil.which(name)
        if found:
            out.append(found)
    # pyenv installs that are not selected (their shims refuse to run them).
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if root.is_dir():
        for d in sorted(root.glob(f"{version}*"), reverse=True):
            exe = d / "bin" / f"python{version}"
            if exe.is_file():
                out.append(str(exe))
    return out


def find_python(version: Optional[str]) -> str:
    """The interpreter that a new venv is made from: this one, an interpreter path, or Python X.Y
    (pythonX.Y on PATH, or a pyenv install)."""
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if version is None or version == here:
        return sys.executable
    if os.sep in version or (os.altsep and os.altsep in version) or version.startswith("python"):
        path = shutil.which(version) or version
        if os.path.exists(path):
            return path
        raise StageError(f"no interpreter at {version}",
                         next_step="pass --python X.Y or a path that exists",
                         ref="E526", kind="usage")
    for cand in _candidates(version):
        if _runs_as(cand, version):
            return cand
    hint = "install it (your OS packages, pyenv, or the python.org installer)"
    if shutil.which("uv"):
        hint = f"`uv python install {version}`, then run again"
    raise StageError(
        f"no Python {version} on this machine",
        why=f"looked for python{version} on PATH and in pyenv's versions",
        next_step=f"{hint}; or leave out --python to use {here} ({sys.executable})",
        ref="E510", kind="unavailable",
    )


def venv_python(path: Path) -> Path:
    if os.name == "nt":
        return path / "Scripts" / "python.exe"
    return path / "bin" / "python"


def venv_state(path: Path) -> str:
    """'missing', 'empty' (an empty folder), 'venv' (has pyvenv.cfg and a python), or 'other'."""
    if not path.exists():
        return "missing"
    if not path.is_dir():
        return "other"
    if (path / "pyvenv.cfg").is_file() and venv_python(path).exists():
        return "venv"
    try:
        next(path.iterdir())
    except StopIteration:
        return "empty"
    return "other"


def check_venv_target(path: Path) -> str:
    if path.is_symlink() and not path.exists():
        try:
            os.stat(path)
            dangling = "which does not exist"
        except OSError as exc:  # ELOOP: a link that leads back to itself
            dangling = "a loop of links" if exc.errno == errno.ELOOP else "which does not exist"
        raise StageError(
            f"{path} is a symbolic link to {os.readlink(path)}, {dangling}",
            why="mlprobe makes a venv in a missing or empty folder, and follows a link only to a folder "
                "that is there",
            next_step=(f"create the folder it points to (mkdir -p {shlex.quote(os.path.realpath(path))}), or pass "
                       "the real path as --venv PATH") if dangling != "a loop of links" else
                      f"remove the link (rm {shlex.quote(str(path))}) or pass another path as --venv PATH",
            ref="E509", kind="usage",
        )
    state = venv_state(path)
    if state == "other":
        raise StageError(
            f"{path} exists and is not a virtual environment",
            why="mlprobe creates a new venv only in a missing or empty folder, and reuses one that has "
                "a pyvenv.cfg",
            next_step="pick another --venv PATH, or empty that folder yourself",
            ref="E509", kind="usage",
        )
    return state


def check_system_target(info: Interpreter) -> None:
    if info.externally_managed:
        raise StageError(
            f"{info.executable} is externally managed (PEP 668)",
            why="its distribution manages these packages; pip would fight the OS package manager",
            next_step="install into a virtual environment instead: leave out --system (mlprobe makes one), "
                      "or pass --venv PATH",
            ref="E508", kind="usage",
        )


def create_venv_argv(base_python: str, path: Path, with_pip: bool) -> List[str]:
    argv = [base_python, "-m", "venv"]
    if not with_pip:
        argv.append("--without-pip")
    return argv + [str(path)]


def uv_venv_argv(uv: str, base_python: str, path: Path) -> List[str]:
    """uv makes the venv (a few hundredths of a second; `python -m venv` runs ensurepip for seconds)."""
    # the folder is there already: mlprobe made it (empty) to claim it before anything is written
    return [uv, "venv", "--no-config", "--quiet", "--allow-existing", "--python", base_python, str(path)]


def bundled_pip_wheel(stdlib: str) -> Optional[Path]:
    """The pip wheel the base interpreter's ensurepip carries (what `python -m venv` would install),
    or None (a Python without ensurepip, as some distributions ship it)."""
    found = sorted(Path(stdlib).glob("ensurepip/_bundled/pip-*.whl")) if stdlib else []
    return found[-1] if found else None


def uv_seed_pip_argv(uv: str, venv_python: str, wheel: Optional[Path], source: List[str]) -> List[str]:
    """pip into a venv uv made, so that a later `pip install` there finds pip (and the pins in its
    pip.conf): the base interpreter's bundled wheel, offline, else pip from the install's sources.
    Not `uv venv --seed`: before Python 3.12 that asks an index for setuptools and wheel as well."""
    what = ["--no-index", "--no-deps", str(wheel)] if wheel is not None else [*source, "pip"]
    return [uv, "pip", "install", "--no-config", "--quiet", "--python", venv_python, *what]


def default_venv_path(recipe_id: str, cwd: Optional[Path] = None) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in recipe_id).strip("-.") or "recipe"
    return (cwd or Path.cwd()) / f"mlprobe-{safe}-venv"
