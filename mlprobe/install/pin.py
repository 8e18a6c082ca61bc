"""Keep the build `install --apply` chose: a constraints file in the venv that pip and uv both honour.

What each installer really reads (checked with pip 23.2-26.3 and uv 0.13):
- pip reads a "site" configuration file, `sys.prefix/pip.conf` (`pip.ini` on Windows), whenever it
  runs with the venv's interpreter, activated or not. Its `[install] constraint` names the pins
  file. The site file wins over the user's and the global files for the same key, so the
  constraint files those name are carried into ours; a PIP_CONSTRAINT variable still wins over
  every file (said when pinning).
- uv reads no pip.conf, and a `uv.toml` only in the current folder and above (so one in the venv
  counts only while the shell is inside the venv). It does read UV_CONSTRAINT, a space-separated
  list of files or file URLs: bin/activate (and its fish, csh, PowerShell and cmd siblings) sets it,
  so `uv pip install` in an activated venv honours the pins; `uv pip install --python VENV/bin/python`
  from a shell where the venv is not active does not.
- A constraints file cannot name an index (pip refuses URLs in constraints), so the build is kept
  by its exact version with its local label (`torch==2.13.0+cpu`), which only the recipe's index
  publishes; the index is written beside each pin for people and for `mlprobe doctor`.
Both tools are given the file as a `file:` URL, so a folder name with spaces stays one entry.
"""

from __future__ import annotations

import configparser
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import StageError
from ..urls import strip_credentials
from ..venvconf import activate

PINS_FILE = "mlprobe-pins.txt"
UV_VAR = "UV_CONSTRAINT"
_HEADER = "# mlprobe build pins"
_PIN_LINE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s#;]+)\s*(?:#\s*from\s+(.+?))?\s*$")
_META = re.compile(r"^#\s*(recipe|pip-conf):\s*(.*)$")


def pip_conf_name() -> str:
    return "pip.ini" if os.name == "nt" else "pip.conf"


@dataclass(frozen=True)
class Pin:
    """One kept build: the distribution, its exact version (with its local label), and where it
    came from: the index URL, the --find-links folders, or "pip's configuration" (None when unknown)."""
    name: str
    version: str
    index: Optional[str] = None

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class PinSet:
    """The pins of one venv, as read back from its pins file."""
    venv: Path
    file: Path
    pins: Tuple[Pin, ...]
    recipe: Optional[str] = None
    pip_conf: bool = False  # the venv's pip.conf names the file
    uv_env: bool = False  # its activate script sets UV_CONSTRAINT to it

    def to_dict(self) -> Dict[str, object]:
        return {"venv": str(self.venv), "file": str(self.file), "recipe": self.recipe,
                "pins": [{"name": p.name, "version": p.version, "index": p.index} for p in self.pins],
                "pip_conf": self.pip_conf, "uv_env": self.uv_env}


@dataclass(frozen=True)
class Swap:
    """A pinned build that is no longer the one installed (replaced with --force-reinstall, from
    outside the venv, or by an installer that did not see the pin)."""
    name: str
    pinned: str
    installed: Optional[str]  # None: removed

    def sentence(self) -> str:
        if self.installed is None:
            return f"{self.name} {self.pinned} was pinned but is no longer installed"
        return f"{self.name} {self.pinned} was pinned; {self.installed} is installed instead"


# ---------------------------------------------------------------- pure ------------------------

def file_url(path: Path) -> str:
    """The file: URL pip and uv both read (spaces percent-encoded, so a list stays a list)."""
    return Path(os.path.abspath(path)).as_uri()


def render_pins(pins: Sequence[Pin], recipe: Optional[str], pip_conf_note: str) -> str:
    lines = [_HEADER,
             "# The builds `mlprobe install --apply` chose for this environment. pip (through this venv's",
             f"# {pip_conf_name()}) and uv (through UV_CONSTRAINT, set when the venv is activated) refuse to",
             "# replace them. `mlprobe install --unpin VENV` lifts the pins.",
             f"# recipe: {recipe or '-'}",
             f"# pip-conf: {pip_conf_note}"]
    for p in pins:
        lines.append(p.requirement + (f"  # from {p.index}" if p.index else ""))
    return "\n".join(lines) + "\n"


def parse_pins(text: str) -> Tuple[Optional[str], str, List[Pin]]:
    """(recipe, pip-conf note, pins) of a pins file (pure; lines it does not know are skipped)."""
    recipe: Optional[str] = None
    note = ""
    pins: List[Pin] = []
    for line in text.splitlines():
        m = _META.match(line.strip())
        if m:
            if m.group(1) == "recipe":
                recipe = None if m.group(2).strip() in ("", "-") else m.group(2).strip()
            else:
                note = m.group(2).strip()
            continue
        m = _PIN_LINE.match(line)
        if m:
            pins.append(Pin(m.group(1), m.group(2), m.group(3)))
    return recipe, note, pins


def choose_pins(requested: Iterable[str], installed: Mapping[str, Tuple[str, str]],
                index: Optional[str], from_index: Callable[[str], Optional[str]] = lambda _n: None
                ) -> List[Pin]:
    """The builds to keep: every distribution the recipe named, and every installed one whose
    version carries a local label (+cpu, +cu130, +rocm6.2: a build only its own index has).
    `installed` maps canonical names to (name, version) as the venv reports them."""
    names: Dict[str, None] = {}
    for spec in requested:
        try:
            names[str(canonicalize_name(Requirement(spec).name))] = None
        except InvalidRequirement:
            continue
    for key, (_name, version) in installed.items():
        try:
            if Version(version).local:
                names[key] = None
        except InvalidVersion:
            continue
    out: List[Pin] = []
    for key in names:
        if key not in installed:
            continue
        name, version = installed[key]
        out.append(Pin(name, version, strip_credentials(from_index(key) or index)))
    return out


def constraint_values(config_list: str) -> Tuple[List[str], Optional[str]]:
    """From `pip config list`: (the constraint files pip's configuration files name for `install`,
    the value of PIP_CONSTRAINT when that variable is set). The install section wins over global."""
    found: Dict[str, str] = {}
    for line in config_list.splitlines():
        m = re.match(r"^(:env:|global|install)\.constraint='(.*)'$", line.strip())
        if m:
            found[m.group(1)] = m.group(2)
    files = found.get("install", found.get("global", ""))
    return files.split(), found.get(":env:")


def pip_conf_with(old: Optional[str], constraints: Sequence[str]) -> str:
    """The venv's pip configuration with `[install] constraint` set (pure; other keys kept)."""
    cp = configparser.RawConfigParser()
    if old:
        cp.read_string(old)
    if not cp.has_section("install"):
        cp.add_section("install")
    cp.set("install", "constraint", " ".join(constraints))
    buf = io.StringIO()
    cp.write(buf)
    return buf.getvalue()


def pip_conf_without(old: str, before: Optional[str]) -> Optional[str]:
    """The venv's pip configuration with `[install] constraint` as it was before pinning (`before`;
    None: unset). None when nothing is left (remove the file)."""
    cp = configparser.RawConfigParser()
    cp.read_string(old)
    if cp.has_section("install") and cp.has_option("install", "constraint"):
        # the other entries are copies of what pip's user and global files named: dropped, so
        # that those files decide again
        if before is not None:
            cp.set("install", "constraint", before)
        else:
            cp.remove_option("install", "constraint")
        if not cp.options("install"):
            cp.remove_section("install")
    if not cp.sections():
        return None
    buf = io.StringIO()
    cp.write(buf)
    return buf.getvalue()


def find_swaps(pins: PinSet, installed: Mapping[str, str]) -> List[Swap]:
    """Pinned builds that are not what is installed (pure). `installed`: name -> version (any
    spelling of the name)."""
    have = {str(canonicalize_name(k)): v for k, v in installed.items()}
    out = []
    for p in pins.pins:
        now = have.get(str(canonicalize_name(p.name)))
        if now is None or now != p.version:
            out.append(Swap(p.name, p.version, now))
    return out


# ---------------------------------------------------------------- the venv --------------------

def _scripts_dir(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin")


def read_pins(venv: Path) -> Optional[PinSet]:
    """The pins mlprobe keeps in this venv (None when it keeps none). For `mlprobe doctor`: with
    `find_swaps(pins, {name: version})` it names a build replaced anyway."""
    venv = Path(venv)
    path = venv / PINS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    recipe, _note, pins = parse_pins(text)
    url = file_url(path)
    try:
        conf = (venv / pip_conf_name()).read_text(encoding="utf-8")
        cp = configparser.RawConfigParser()
        cp.read_string(conf)
        in_conf = url in cp.get("install", "constraint", fallback="").split()
    except (OSError, configparser.Error):
        in_conf = False
    uv_env = activate.read_env(_scripts_dir(venv)).get(UV_VAR) == url
    return PinSet(venv=venv, file=path, pins=tuple(pins), recipe=recipe, pip_conf=in_conf, uv_env=uv_env)


def pin_files(venv: Path) -> List[Path]:
    """Every file pinning writes or edits (so a transaction can save them first)."""
    return [venv / PINS_FILE, venv / pip_conf_name(), *activate.activate_scripts(_scripts_dir(venv))]


def write_pins(venv: Path, pins: Sequence[Pin], recipe: Optional[str], inherited: Sequence[str]) -> PinSet:
    """Write the pins file, name it in the venv's pip.conf (after the constraint files pip's
    configuration already named, `inherited`) and in UV_CONSTRAINT of its activate scripts."""
    venv = Path(venv)
    if not pins:
        raise StageError("nothing to pin", why="the install left no distribution of the recipe's",
                         next_step="check `pip list` in the environment", ref="E530", kind="failure")
    path = venv / PINS_FILE
    url = file_url(path)
    conf_path = venv / pip_conf_name()
    old_conf: Optional[str] = None
    if conf_path.is_file():
        old_conf = conf_path.read_text(encoding="utf-8")
    previous = read_pins(venv)
    if previous is not None and old_conf is not None:  # re-pinning: what was there before the first pin
        _r, note, _p = parse_pins(previous.file.read_text(encoding="utf-8"))
    elif old_conf is None:
        note = "created"
    else:
        cp = configparser.RawConfigParser()
        try:
            cp.read_string(old_conf)
        except configparser.Error as exc:
            raise StageError(f"cannot read {conf_path}", why=str(exc),
                             next_step="fix or remove that file, then run the install again",
                             ref="E530", kind="failure") from None
        before = cp.get("install", "constraint", fallback=None)
        note = "install.constraint was unset" if before is None else f"install.constraint was: {before}"
    constraints = [c for c in inherited if c != url] + [url]
    path.write_text(render_pins(pins, recipe, note), encoding="utf-8")
    conf_path.write_text(f"# {_HEADER[2:]}: `mlprobe install --unpin` removes what it added here\n"
                         + pip_conf_with(old_conf, constraints), encoding="utf-8")
    scripts = _scripts_dir(venv)
    env = activate.read_env(scripts)
    env[UV_VAR] = url
    activate.write_env(scripts, env, activate.read_prepend(scripts))
    out = read_pins(venv)
    assert out is not None
    return out


def unpin(venv: Path) -> List[str]:
    """Remove the pins from a venv: the file, its line in pip.conf (putting back what was there
    before), UV_CONSTRAINT in the activate scripts. Returns what was done, in words."""
    venv = Path(venv)
    pins = read_pins(venv)
    if pins is None:
        return []
    done: List[str] = []
    _r, note, _p = parse_pins(pins.file.read_text(encoding="utf-8"))
    conf_path = venv / pip_conf_name()
    if conf_path.is_file():
        old = conf_path.read_text(encoding="utf-8")
        before = note.split(":", 1)[1].strip() if note.startswith("install.constraint was:") else None
        body = "\n".join(ln for ln in old.splitlines() if not ln.startswith(f"# {_HEADER[2:]}"))
        try:
            new: Optional[str] = pip_conf_without(body, before)
        except configparser.Error:
            new = body
        if new is None:
            conf_path.unlink()
            done.append(f"removed {conf_path}")
        else:
            conf_path.write_text(new, encoding="utf-8")
            done.append(f"took the pins out of {conf_path}")
    scripts = _scripts_dir(venv)
    env = activate.read_env(scripts)
    if UV_VAR in env:
        env.pop(UV_VAR)
        written = activate.write_env(scripts, env, activate.read_prepend(scripts))
        done.append(f"{UV_VAR} removed from {len(written)} activate script(s)")
    pins.file.unlink()
    done.append(f"removed {pins.file} ({', '.join(p.requirement for p in pins.pins)})")
    return done
