"""The start-up hook: a recipe's settings reach every interpreter of the venv, however it is started
(an IDE's interpreter setting, a Jupyter kernel, cron or systemd, `uv run`, plain `V/bin/python`), not
only a shell where `activate` ran.

It is the mechanism of virtualenv's `_virtualenv.pth`: `site` runs each `import` line of a `.pth`
file in site-packages when the interpreter starts, so one line, `import _mlprobe_startup`, loads a small
module before any user code (and so before any framework) runs. That module

- sets each of the recipe's variables that is not already set: a value the person set before starting
  Python wins, as in the activate scripts (venvconf/activate.py);
- loads the compatibility shims the recipe needs (the PlaidML shim, shims/plaidml_compat.py): one
  start-up mechanism for both;
- names the variables it set in _MLPROBE_HOOK_SET, so that a process started from this one (mlprobe
  itself, run from the venv) tells them from a value the person set;
- does nothing when MLPROBE_HOOK is 0, off, no or false.

A setting the dynamic loader reads only when the process starts (LD_LIBRARY_PATH, DYLD_*) cannot be set
from inside Python: the hook never fakes it; install writes a launcher (`V/bin/mlprobe-python`) and the
kernel spec's `env` instead, and the plan says so.

The module holds its data as Python literals (no file to read, no JSON to import: `python -c pass`
pays a fraction of a millisecond, see benchmarks/bench_startup_hook.py) and a digest of them, so that
mlprobe sees a hand edit and leaves the file alone. It also lists what mlprobe added to the venv
besides packages (kernel specs, the launcher, loader fixes), which `install --detach` removes.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import StageError

MODULE = "_mlprobe_startup"
PTH = MODULE + ".pth"
PTH_LINE = f"import {MODULE}\n"
OFF_VAR = "MLPROBE_HOOK"
OFF_VALUES = ("0", "off", "no", "false")
# The names the hook set (it was unset before): a child inherits them with the values, and mlprobe
# running in such a process tells them from a value the person set (doctor/starts.py plain_base).
SET_MARK = "_MLPROBE_HOOK_SET"
HOOK_VERSION = 1
_MARK = re.compile(r"^# mlprobe-hook: (\d+) sha256=([0-9a-f]{64})$", re.M)
# Read by the dynamic loader when the process starts: setting them later changes nothing.
LOADER_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "DYLD_LIBRARY_PATH", "DYLD_FALLBACK_LIBRARY_PATH",
               "DYLD_INSERT_LIBRARIES")

_BODY = '''
def _start():
    import os
    env = os.environ
    if env.get("MLPROBE_HOOK", "").strip().lower() in ("0", "off", "no", "false"):
        return
    added = [key for key in SETTINGS if key not in env]
    for key in added:
        env[key] = SETTINGS[key]
    if added:
        seen = [k for k in env.get("_MLPROBE_HOOK_SET", "").split(",") if k]
        env["_MLPROBE_HOOK_SET"] = ",".join(seen + [k for k in added if k not in seen])
    for name in SHIMS:
        try:
            __import__(name)
        except Exception:
            pass


try:
    _start()
except Exception:
    pass
'''


def hook_off(env: Mapping[str, str]) -> bool:
    """True when `env` turns the start-up hook off (MLPROBE_HOOK=0/off/no/false)."""
    return env.get(OFF_VAR, "").strip().lower() in OFF_VALUES


@dataclass(frozen=True)
class HookState:
    """What a venv's start-up hook holds, read back from its module."""
    path: Path
    settings: Dict[str, str]
    shims: Tuple[str, ...] = ()
    recipe: Optional[str] = None
    label: Optional[str] = None  # the build, as a kernel's display name says it
    manifest: Tuple[str, ...] = ()  # files mlprobe added to the venv besides packages
    edited: bool = False  # the digest does not match: changed by hand (left alone)
    pth: bool = True  # the .pth line that loads it is there

    def to_dict(self) -> Dict[str, object]:
        return {"path": str(self.path), "settings": dict(self.settings), "shims": list(self.shims),
                "recipe": self.recipe, "label": self.label, "manifest": list(self.manifest),
                "edited": self.edited, "loaded_at_start": self.pth}


def _data_lines(settings: Mapping[str, str], shims: Sequence[str], recipe: Optional[str],
                label: Optional[str], manifest: Sequence[str]) -> str:
    return "".join((
        f"RECIPE = {recipe!r}\n",
        f"LABEL = {label!r}\n",
        f"SETTINGS = {dict(sorted(settings.items()))!r}\n",
        f"SHIMS = {tuple(shims)!r}\n",
        f"MANIFEST = {tuple(sorted(set(manifest)))!r}\n",
    ))


def render(settings: Mapping[str, str], shims: Sequence[str] = (), recipe: Optional[str] = None,
           label: Optional[str] = None, manifest: Sequence[str] = ()) -> str:
    """The module's text (Python 3.7 compatible, standard library only, never raises at start-up)."""
    data = _data_lines(settings, shims, recipe, label, manifest) + _BODY
    digest = hashlib.sha256(data.encode("utf-8")).hexdigest()
    head = (
        '"""Written by mlprobe (`mlprobe install`): sets this environment\'s settings when the interpreter\n'
        "starts, before any framework loads, where the variable is not already set (a value set before\n"
        "Python starts wins). Loaded by _mlprobe_startup.pth. Turn it off for one run with MLPROBE_HOOK=0;\n"
        'remove it (and everything else mlprobe added, keeping the packages) with `mlprobe install --detach VENV`."""\n'
        f"# mlprobe-hook: {HOOK_VERSION} sha256={digest}\n"
    )
    return head + data


def parse(text: str, path: Path, pth: bool = True) -> HookState:
    """The hook's data from its text: literals only (never executed); `edited` when the digest is off."""
    m = _MARK.search(text)
    edited = True
    data = text
    if m:
        data = text[m.end() + 1:]
        edited = hashlib.sha256(data.encode("utf-8")).hexdigest() != m.group(2)
    values: Dict[str, object] = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return HookState(path=path, settings={}, edited=True, pth=pth)
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                edited = True
    raw_settings = values.get("SETTINGS")
    settings = {str(k): str(v) for k, v in raw_settings.items()} if isinstance(raw_settings, dict) else {}
    shims = values.get("SHIMS")
    manifest = values.get("MANIFEST")
    recipe = values.get("RECIPE")
    label = values.get("LABEL")
    return HookState(path=path, settings=settings,
                     shims=tuple(str(s) for s in shims) if isinstance(shims, (list, tuple)) else (),
                     recipe=recipe if isinstance(recipe, str) else None,
                     label=label if isinstance(label, str) else None,
                     manifest=tuple(str(s) for s in manifest) if isinstance(manifest, (list, tuple)) else (),
                     edited=edited, pth=pth)


def module_path(site: Path) -> Path:
    return site / (MODULE + ".py")


def read(site: Path) -> Optional[HookState]:
    """The hook in this site-packages folder, or None when there is none."""
    path = module_path(site)
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None
    pth = site / PTH
    try:
        loaded = pth.read_text(encoding="utf-8", errors="replace").strip() == PTH_LINE.strip()
    except OSError:
        loaded = False
    return parse(text, path, pth=loaded)


class HookError(StageError):
    """The hook cannot be written or removed as asked (said with the file and the next step)."""


def refuse_foreign(site: Path, force: bool) -> None:
    """A .pth or module of that name that mlprobe did not write, or a hook edited by hand, is left alone."""
    pth = site / PTH
    if os.path.lexists(pth):
        try:
            line = pth.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise HookError(f"cannot read {pth}", why=str(exc), next_step="check its permissions",
                            ref="E561", kind="failure") from None
        if line.strip() != PTH_LINE.strip() and not force:
            raise HookError(f"{pth} was not written by mlprobe: it is left as it is",
                            why=f"it holds {line.strip()[:80]!r}, not {PTH_LINE.strip()!r}",
                            next_step="rename or remove that file, or pass --force to replace it",
                            ref="E562", kind="usage")
    state = read(site)
    if state is not None and state.edited and not force:
        raise HookError(f"the start-up hook {state.path} was edited by hand: it is left as it is",
                        why="its content no longer matches the digest mlprobe wrote into it",
                        next_step=f"move your changes elsewhere and remove {state.path.name}, "
                                  "or pass --force to replace it", ref="E563", kind="usage")


def writable(site: Path) -> Optional[str]:
    """Why the hook cannot be written into `site` (None when it can)."""
    if not site.is_dir():
        return f"{site} is not a folder"
    if not os.access(site, os.W_OK | os.X_OK):
        return f"{site} is not writable by this user"
    return None


def write(site: Path, settings: Mapping[str, str], shims: Sequence[str] = (), recipe: Optional[str] = None,
          label: Optional[str] = None, manifest: Sequence[str] = (), force: bool = False) -> List[Path]:
    """Write (or rewrite) the module and its .pth into `site`; returns the files written. Refuses,
    with nothing written, a read-only folder, a foreign .pth of that name or a hook edited by hand."""
    from .activate import check_values

    check_values(dict(settings))
    loader = sorted(k for k in settings if k in LOADER_VARS)
    if loader:
        raise HookError(f"{', '.join(loader)} cannot be set by the start-up hook",
                        why="the dynamic loader reads it only when the process starts",
                        next_step="use the launcher (V/bin/mlprobe-python) or the kernel spec", ref="E564",
                        kind="usage")
    why = writable(site)
    if why:
        raise HookError("cannot write the start-up hook", why=why,
                        next_step="install into a venv you own (`--venv PATH`), or set the variables yourself "
                                  "where Python starts (shown below)", ref="E561", kind="failure")
    refuse_foreign(site, force)
    text = render(settings, shims, recipe, label, manifest)
    mod, pth = module_path(site), site / PTH
    written = []
    for path, content in ((mod, text), (pth, PTH_LINE)):
        try:
            old = path.read_bytes().decode("utf-8", "replace") if path.is_file() else None
        except OSError:
            old = None
        if old != content:
            if path.is_symlink():
                path.unlink()
            path.write_text(content, encoding="utf-8")
            written.append(path)
    back = read(site)
    if back is None or back.edited or back.settings != dict(settings) or not back.pth:
        raise HookError("the start-up hook did not read back as written", why=str(mod),
                        next_step="check the file system (full, or changed while writing)", ref="E566",
                        kind="failure")
    return written


def remove(site: Path, force: bool = False) -> List[Path]:
    """Remove the hook's two files (and their byte-code); a hook edited by hand stays unless `force`."""
    state = read(site)
    if state is not None and state.edited and not force:
        raise HookError(f"the start-up hook {state.path} was edited by hand: it is left as it is",
                        why="its content no longer matches the digest mlprobe wrote into it",
                        next_step="remove it yourself, or pass --force", ref="E563", kind="usage")
    removed: List[Path] = []
    pth = site / PTH
    if os.path.lexists(pth):
        try:
            line = pth.read_text(encoding="utf-8", errors="replace")
        except OSError:
            line = ""
        if line.strip() == PTH_LINE.strip() or force:
            pth.unlink()
            removed.append(pth)
    mod = module_path(site)
    if os.path.lexists(mod):
        mod.unlink()
        removed.append(mod)
    cache = site / "__pycache__"
    if cache.is_dir():
        for p in cache.glob(MODULE + ".*.pyc"):
            p.unlink()
    return removed


# Variables the activate scripts set for the tools a person runs from that shell, not for Python: uv
# reads the venv's pins from UV_CONSTRAINT (install/pin.py). A Python start never reads them, so they
# are not settings a plain start must get.
SHELL_ONLY_VARS = frozenset({"UV_CONSTRAINT"})

@dataclass
class Settings:
    """What a venv's settings are, wherever mlprobe wrote them: the hook, the activate scripts, the
    kernel specs (doctor reads this to tell where each value of a start comes from)."""
    hook: Optional[HookState] = None
    activate: Dict[str, str] = field(default_factory=dict)
    prepend: Dict[str, str] = field(default_factory=dict)
    kernels: Dict[str, Dict[str, str]] = field(default_factory=dict)  # kernel.json path -> its env

    def wanted(self) -> Dict[str, str]:
        """Every variable some place says this venv needs, with the value it says."""
        out: Dict[str, str] = {}
        for env in self.kernels.values():
            out.update({k: v for k, v in env.items() if k not in LOADER_VARS})
        out.update({k: v for k, v in self.activate.items() if k not in SHELL_ONLY_VARS})
        if self.hook is not None:
            out.update(self.hook.settings)
        return out


__all__ = ["MODULE", "PTH", "OFF_VAR", "LOADER_VARS", "SHELL_ONLY_VARS", "HookState", "HookError", "Settings", "hook_off", "read",
           "write", "remove", "render", "parse", "writable"]
