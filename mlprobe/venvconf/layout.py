"""Where a venv keeps what mlprobe wrote into it, found without starting its interpreter."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional

from . import activate, hook, kernelspec


def scripts_dir(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin")


def site_dirs(venv: Path) -> List[Path]:
    """The venv's site-packages folders, found without starting its interpreter."""
    found = sorted(venv.glob("lib/python*/site-packages")) + sorted(venv.glob("lib64/python*/site-packages"))
    win = venv / "Lib" / "site-packages"
    if win.is_dir():
        found.append(win)
    out: List[Path] = []
    for p in found:
        if p.is_dir() and all(os.path.realpath(p) != os.path.realpath(q) for q in out):
            out.append(p)
    return out


def read_settings(venv: Path, environ: Optional[Mapping[str, str]] = None) -> hook.Settings:
    """Where this venv's settings are, as written (no interpreter started)."""
    environ = os.environ if environ is None else environ
    scripts = scripts_dir(venv)
    state: Optional[hook.HookState] = None
    for site in site_dirs(venv):
        state = hook.read(site)
        if state is not None:
            break
    kernels: Dict[str, Dict[str, str]] = {}
    specs = kernelspec.our_specs(venv, venv) + kernelspec.our_specs(kernelspec.user_data_dir(environ) / "kernels", venv)
    for spec in specs:
        kernels[str(spec)] = kernelspec.spec_env(kernelspec.read_spec(spec))
    return hook.Settings(hook=state, activate=activate.read_env(scripts), prepend=activate.read_prepend(scripts),
                         kernels=kernels)


__all__ = ["scripts_dir", "site_dirs", "read_settings"]
