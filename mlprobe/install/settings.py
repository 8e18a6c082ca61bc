"""Everything mlprobe writes into a venv besides packages, in one place: the recipe's settings in the
activate scripts (venvconf/activate.py), the start-up hook that carries them to every start (venvconf/hook.py), the
Jupyter kernel spec (venvconf/kernelspec.py), the launcher for settings only the dynamic loader reads
(LD_LIBRARY_PATH), and the list of the loader fixes and files added; `detach` takes all of it out
again, with the pins (pin.py), and keeps the packages.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..errors import StageError
from ..venvconf import activate, hook, kernelspec
from ..venvconf.layout import read_settings, scripts_dir, site_dirs

LAUNCHER = "mlprobe-python"
_LAUNCHER_MARK = "# mlprobe launcher"


def shim_modules(shims: Sequence[str]) -> List[str]:
    """The modules the start-up hook imports for a recipe's shims."""
    from ..shims.plaidml_compat import MODULE_NAME

    return [MODULE_NAME for s in shims if s in ("plaidml-collections", "plaidml", "plaidml-compat")][:1]


def launcher_text(python: str, prepend: Mapping[str, str]) -> str:
    lines = ["#!/bin/sh", f"{_LAUNCHER_MARK}: starts this venv's python with what the dynamic loader reads only",
             "# when a process starts (a start-up hook inside Python is too late for it). Point an IDE,",
             "# a service or cron at this file instead of bin/python. Removed by `mlprobe install --detach`."]
    for k, v in prepend.items():
        lines.append(f'{k}={activate._sh(v)}"${{{k}:+:${k}}}"')
        lines.append(f"export {k}")
    lines.append(f'exec {activate._sh(python)} "$@"')
    return "\n".join(lines) + "\n"


@dataclass
class Written:
    """What write_settings put where (paths as strings), for the result and the transcript."""
    activate: List[str] = field(default_factory=list)
    hook: List[str] = field(default_factory=list)
    kernels: List[str] = field(default_factory=list)
    launcher: Optional[str] = None
    notes: List[str] = field(default_factory=list)


def has_ipykernel(site: Path) -> bool:
    return (site / "ipykernel").is_dir() or any(site.glob("ipykernel-*.dist-info"))


def kernel_folders(venv: Path, site: Path, recipe: str, kernel: Optional[bool], user_kernel: bool,
                   environ: Mapping[str, str]) -> List[Path]:
    """Where the kernel specs go: the venv's (when it has ipykernel, or `kernel`), the user's (`user_kernel`)."""
    folders: List[Path] = []
    if has_ipykernel(site) if kernel is None else kernel:
        folders.append(venv / kernelspec.KERNELS / kernelspec.kernel_name(recipe))
    if user_kernel:
        folders.append(kernelspec.user_data_dir(environ) / "kernels" / kernelspec.kernel_name(recipe))
    return folders


def check(venv: Path, site: Path, env: Mapping[str, str], prepend: Mapping[str, str], recipe: str, *,
          kernel: Optional[bool] = None, user_kernel: bool = False, force: bool = False,
          environ: Optional[Mapping[str, str]] = None) -> List[Path]:
    """Every refusal of write_settings, before anything is written (the caller may have files of its
    own to write first, as the PlaidML shim): a value some place cannot hold, a site-packages this
    user cannot write, a .pth or hook mlprobe did not write or that was edited, a kernel spec of the
    person's own. Returns the kernel spec folders."""
    environ = os.environ if environ is None else environ
    everything = dict(env, **{k: v for k, v in prepend.items() if k not in env})
    activate.check_values(everything)  # one refusal for every place
    why = hook.writable(site)
    if why:
        raise hook.HookError("cannot write the start-up hook", why=why,
                             next_step="install into a venv you own, or set the variables where Python starts",
                             ref="E561", kind="failure")
    hook.refuse_foreign(site, force)
    folders = kernel_folders(venv, site, recipe, kernel, user_kernel, environ)
    for folder in folders:
        kernelspec.refuse_foreign(folder)
    return folders


def write_settings(venv: Path, python: str, site: Path, env: Mapping[str, str], prepend: Mapping[str, str],
                   shims: Sequence[str], recipe: str, label: str, *, kernel: Optional[bool] = None,
                   user_kernel: bool = False, manifest: Sequence[str] = (), txn: Any = None,
                   force: bool = False, environ: Optional[Mapping[str, str]] = None) -> Written:
    """Write the settings everywhere they go: activate scripts, start-up hook, kernel spec (when the
    venv has ipykernel, or `kernel` is True; never when it is False), the user-level kernel spec
    (`user_kernel`), and the launcher when a loader variable is prepended. Each file is handed to
    `txn.protect_file` first (and a file outside the venv to `txn.created`), so a failure undoes it."""
    environ = os.environ if environ is None else environ
    folders = check(venv, site, env, prepend, recipe, kernel=kernel, user_kernel=user_kernel, force=force,
                    environ=environ)
    settings = {k: v for k, v in env.items() if k not in hook.LOADER_VARS}
    loader = {k: v for k, v in dict(prepend, **{k: v for k, v in env.items() if k in hook.LOADER_VARS}).items()}
    out = Written()
    scripts = scripts_dir(venv)

    def protect(p: Path) -> None:
        if txn is not None:
            txn.protect_file(p)

    for p in activate.activate_scripts(scripts):
        protect(p)
    out.activate = [str(p) for p in activate.write_env(scripts, dict(env), prepend)]
    added = list(manifest)
    if loader and os.name != "nt":
        path = scripts / LAUNCHER
        protect(path)
        path.write_text(launcher_text(python, loader), encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        out.launcher = str(path)
        added.append(str(path))
        out.notes.append(f"{', '.join(loader)} is read by the dynamic loader when a process starts: outside "
                         f"`activate`, start Python as {path} (or through the kernel spec)")
    display = f"Python (mlprobe: {label})"
    for folder in folders:
        inside = _inside(folder, venv)
        spec = folder / kernelspec.SPEC
        protect(spec)
        if not inside and txn is not None and not spec.exists():
            txn.created(folder if not folder.exists() else spec)
        doc = kernelspec.spec_document(python, display, env, loader, recipe, venv)
        out.kernels.append(str(kernelspec.write_spec(folder, doc)))
        if not inside:
            added.append(str(spec))
    if kernel is None and not has_ipykernel(site):
        out.notes.append("no Jupyter kernel spec: the venv has no ipykernel (`--kernel` writes one anyway)")
    site_files = [site / hook.PTH, hook.module_path(site)]
    for p in site_files:
        protect(p)
    out.hook = [str(p) for p in hook.write(site, settings, shim_modules(shims), recipe=recipe, label=label,
                                           manifest=added, force=force)]
    precompile(python, [hook.module_path(site)] + [site / f"{m}.py" for m in shim_modules(shims)])
    return out


_COMPILE = ("import py_compile, sys\n"
            "for f in sys.argv[1:]:\n"
            "    py_compile.compile(f, doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)\n")


def precompile(python: str, files: Sequence[Path]) -> bool:
    """Byte-compile the start-up files with the venv's own interpreter (its magic number), hash-checked
    so that a rewrite within the same second is never served stale: a start then reads the cache even
    where PYTHONDONTWRITEBYTECODE keeps Python from writing one. False when it could not."""
    import subprocess

    try:
        r = subprocess.run([python, "-S", "-c", _COMPILE, *[str(f) for f in files if f.is_file()]],
                           capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _inside(path: Path, venv: Path) -> bool:
    try:
        path.resolve().relative_to(venv.resolve())
        return True
    except ValueError:
        return False


@dataclass
class Detached:
    venv: Path
    removed: List[str] = field(default_factory=list)
    kept: List[str] = field(default_factory=list)  # what looked like mlprobe's but is left, with why

    def to_dict(self) -> Dict[str, object]:
        return {"venv": str(self.venv), "removed": list(self.removed), "kept": list(self.kept)}


def detach(venv: Path, force: bool = False, environ: Optional[Mapping[str, str]] = None) -> Detached:
    """Remove everything mlprobe added to `venv` (hook, shims, kernel specs, activate blocks, pins,
    launcher, loader fixes and files it listed) and keep the packages. A file edited by hand, or one
    mlprobe did not write, stays and is named."""
    from . import pin
    from ..shims.plaidml_compat import uninstall_shim

    environ = os.environ if environ is None else environ
    out = Detached(venv=venv)
    manifest: List[str] = []
    for site in site_dirs(venv):
        state = hook.read(site)
        if state is not None:
            manifest += list(state.manifest)
            try:
                out.removed += [f"removed {p}" for p in hook.remove(site, force=force)]
            except StageError as exc:
                out.kept.append(f"{state.path}: {exc.what}")
                continue
        if uninstall_shim(site):
            out.removed.append(f"removed the PlaidML compatibility shim from {site}")
    for spec in kernelspec.our_specs(venv, venv) + kernelspec.our_specs(
            kernelspec.user_data_dir(environ) / "kernels", venv):
        shutil.rmtree(spec.parent, ignore_errors=True)
        out.removed.append(f"removed the kernel spec {spec.parent}")
        _prune_empty(spec.parent.parent, venv / "share")
    out.removed += pin.unpin(venv)
    scripts = scripts_dir(venv)
    if activate.read_env(scripts) or activate.read_prepend(scripts) or any(
            activate.BEGIN in p.read_text(encoding="utf-8", errors="replace") or
            activate.REM_BEGIN in p.read_text(encoding="utf-8", errors="replace")
            for p in activate.activate_scripts(scripts)):
        written = activate.write_env(scripts, {})
        out.removed.append(f"removed mlprobe's settings from {len(written)} activate script(s)")
    launcher = scripts / LAUNCHER
    if launcher.is_file():
        if _LAUNCHER_MARK in launcher.read_text(encoding="utf-8", errors="replace"):
            launcher.unlink()
            out.removed.append(f"removed {launcher}")
        else:
            out.kept.append(f"{launcher}: not written by mlprobe")
    for raw in manifest:
        p = Path(raw)
        if not os.path.lexists(p) or str(p) in out.removed:
            continue
        if p.is_dir() and not p.is_symlink():
            if _inside(p, venv):
                shutil.rmtree(p, ignore_errors=True)
                out.removed.append(f"removed {p}")
            continue
        p.unlink()
        out.removed.append(f"removed {p}")
    return out


def _prune_empty(folder: Path, stop: Path) -> None:
    """Remove `folder` and its parents up to `stop` (included) while they are empty."""
    try:
        folder.resolve().relative_to(stop.resolve().parent)
    except ValueError:
        return
    while True:
        try:
            folder.rmdir()
        except OSError:
            return
        if folder == stop:
            return
        folder = folder.parent


__all__ = ["LAUNCHER", "Written", "Detached", "check", "kernel_folders", "write_settings", "read_settings", "detach", "site_dirs",
           "scripts_dir", "shim_modules", "launcher_text", "has_ipykernel"]
