"""`mlprobe install --settings-only` (a recipe's settings into an existing venv, nothing installed) and
`mlprobe install --detach VENV` (everything mlprobe added to a venv taken out, the packages kept)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..errors import EXIT_OK, EXIT_USAGE, MlprobeError

if TYPE_CHECKING:
    from ..install.steps import InstallOptions
    from ..model.facts import ScanReport
    from ..model.plan import Recommendation


def _venv(given: Optional[Path], option: str) -> Path:
    raw = given if given is not None else (Path(os.environ["VIRTUAL_ENV"]) if os.environ.get("VIRTUAL_ENV") else None)
    if raw is None:
        raise MlprobeError(f"{option} needs a venv", why="--venv is not given and no venv is active",
                           next_step="pass --venv PATH (e.g. --venv .venv)", ref="E534", exit_code=EXIT_USAGE)
    venv = raw.expanduser().absolute()
    if not (venv / "pyvenv.cfg").is_file():
        raise MlprobeError(f"{venv} is not a virtual environment", why="it has no pyvenv.cfg",
                           next_step="pass the folder of a venv (the one `uv sync` or `python -m venv` made)",
                           ref="E534", exit_code=EXIT_USAGE)
    return venv


def settings_only_command(args: argparse.Namespace, opts: "InstallOptions", rec: "Recommendation",
                          report: "Optional[ScanReport]", replay: bool) -> int:
    from ..install import settings
    from ..venvconf import hook
    from ..install.guard import TargetLock
    from ..install.steps import build_plan
    from ..install.venv import inspect_interpreter, venv_python
    from .common import print_json

    if replay:
        from .common import replay_said

        said, drop = replay_said(args)
        raise MlprobeError(f"--settings-only with {said}", why="the settings are written into a venv on this machine",
                           next_step=drop, ref="E523", exit_code=EXIT_USAGE)
    venv = _venv(args.venv, "--settings-only")
    plan = build_plan(rec, opts)
    python = str(venv_python(venv))
    info = inspect_interpreter(python)
    with TargetLock(str(venv)):
        settings.check(venv, Path(info.purelib), plan.env, plan.prepend, plan.recipe, kernel=args.kernel,
                       user_kernel=args.user_kernel, force=args.force)  # before the shim is written
        if plan.shims:
            from ..shims.plaidml_compat import install_shim

            install_shim(info.purelib)
        label = " ".join(x for x in (plan.framework or plan.recipe, plan.variant_label or plan.backend) if x)
        out = settings.write_settings(venv, python, Path(info.purelib), plan.env, plan.prepend, plan.shims,
                                      plan.recipe, label, kernel=args.kernel, user_kernel=args.user_kernel,
                                      force=args.force)
    if args.json:
        print_json({"schema": "mlprobe.install-settings/1", "venv": str(venv), "recipe": plan.recipe,
                    "env": dict(plan.env), "prepend": dict(plan.prepend), "activate_scripts": out.activate,
                    "hook": out.hook, "kernels": out.kernels, "launcher": out.launcher, "notes": out.notes})
        return EXIT_OK
    from .. import ui

    if ui.quiet():
        return EXIT_OK
    names = ", ".join(plan.env) or "no variables"
    print(f"{plan.recipe}'s settings ({names}) are set at every start of {venv}'s Python: the start-up hook "
          f"{hook.PTH}, its activate scripts"
          + (f", the kernel spec {', '.join(out.kernels)}" if out.kernels else ""), file=sys.stderr)
    for note in out.notes:
        print(f"  {note}", file=sys.stderr)
    return EXIT_OK


def detach_command(args: argparse.Namespace) -> int:
    from ..install.guard import TargetLock
    from ..install.settings import detach
    from .common import print_json

    venv = _venv(args.detach, "--detach")
    with TargetLock(str(venv)):
        done = detach(venv, force=args.force)
    if args.json:
        print_json({"schema": "mlprobe.install-detach/1", **done.to_dict()})
        return EXIT_OK
    if not done.removed and not done.kept:
        print(f"{venv} has nothing mlprobe added: nothing to remove", file=sys.stderr)
        return EXIT_OK
    print(f"removed what mlprobe added to {venv}; its packages stay", file=sys.stderr)
    for line in done.removed:
        print(f"  {line}", file=sys.stderr)
    for line in done.kept:
        print(f"  kept {line}", file=sys.stderr)
    return EXIT_OK
