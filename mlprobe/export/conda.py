"""The Export as conda (and mamba, pixi, rattler) take it: the CONDA_OVERRIDE_* variables that make a
solve on another machine (a login node without a GPU) see the captured machine's virtual packages
(`__cuda`, `__glibc`, `__archspec`, `__osx`, `__linux`; knowledge/exports.json CEP-VP) and the
subdir to solve for, plus an environment.yml for recipes with a sourced conda row."""

from __future__ import annotations

import shlex
from typing import List, Optional, Tuple

from ..model import knowledge as kb
from .decide import Export


def overrides(exp: Export) -> List[Tuple[str, str]]:
    """(variable, value) pairs. CONDA_OVERRIDE_CUDA is empty on a machine without a CUDA driver: an empty
    value means "no __cuda", so a solve on a GPU machine does not pick GPU builds for it."""
    m = exp.machine
    out: List[Tuple[str, str]] = []
    if m.conda_subdir:
        out.append(("CONDA_SUBDIR", m.conda_subdir))
    out.append(("CONDA_OVERRIDE_CUDA", m.cuda or ""))
    if m.system == "Linux":
        if m.glibc:
            out.append(("CONDA_OVERRIDE_GLIBC", m.glibc))
        if m.linux:
            out.append(("CONDA_OVERRIDE_LINUX", m.linux))
    if m.system == "Darwin" and m.macos:
        out.append(("CONDA_OVERRIDE_OSX", m.macos))
    if m.microarchitecture:
        out.append(("CONDA_OVERRIDE_ARCHSPEC", m.microarchitecture))
    return out


def env_lines(exp: Export) -> str:
    return "".join(f"{k}={shlex.quote(v) if v else ''}\n" for k, v in overrides(exp))


def conda_row(recipe: str) -> Optional[dict]:  # type: ignore[type-arg]
    return next((r for r in kb.rows("exports", "conda") if r.get("recipe") == recipe), None)


def environment_yml(exp: Export) -> Optional[str]:
    """environment.yml for the recipe, None when no sourced row names its conda channel and package."""
    row = conda_row(exp.recipe)
    if row is None:
        return None
    m = exp.machine
    deps = [f"python={m.python}"] if m.python else ["python"]
    deps.append(str(row["package"]))
    if "cuda-version" in (row.get("with") or []) and m.cuda:
        deps.append(f"cuda-version<={m.cuda}")
    lines = [f"# mlprobe export --to conda: {exp.recipe} for {m.description}",
             f"# {row['channel']}::{row['package']} (source: {row.get('source')}, knowledge/exports.json)",
             f"name: mlprobe-{exp.recipe}", "channels:", f"  - {row['channel']}", "dependencies:"]
    lines += [f"  - {d}" for d in deps]
    if exp.env:
        lines.append("variables:")
        lines += [f"  {k}: {_yaml_str(v)}" for k, v in exp.env.items()]
    return "\n".join(lines) + "\n"


def _yaml_str(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"
