"""The pre-flight of `mlprobe install`: the target interpreter, the build variant's pins, the index
checks and the dry-run resolution by the installer --apply will run. It writes nothing; apply.py
carries the result out."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..errors import StageError
from ..model import shell
from ..model.jsontypes import JsonObject
from ..model.facts import Facts
from ..urls import mask_credentials, mask_doc
from . import keep
from ..venvconf import activate
from .backends import Backend, choose_backend, needs_pip, set_aside
from .lock import LOCK_NAME
from .index import (IndexCheck, Target, check_index, offline_hint, recheck, target_for_interpreter,
                    target_from_report)
from .resolve import Resolution, dry_run, fill_sizes, needs_variant, pin_variants, uv_dry_run, variant_pin
from .steps import InstallOptions, InstallPlan, Step
from .venv import (Interpreter, check_system_target, check_venv_target, default_venv_path, find_python,
                   inspect_interpreter, venv_python)


class Progress:
    """What apply() tells the person watching; the terminal renderer draws it on stderr."""

    def step(self, text: str) -> None: ...

    def line(self, text: str) -> None: ...

    def done(self, text: str, ok: bool = True) -> None: ...

    def close(self) -> None: ...


@dataclass
class TargetEnv:
    mode: str  # new-venv | venv | system | replay
    path: Optional[Path]
    python: str  # receives the packages (new-venv: the base interpreter until the venv exists)
    info: Optional[Interpreter]
    target: Target
    state: str = ""  # venv_state of path

    def to_dict(self) -> JsonObject:
        return {"mode": self.mode, "path": str(self.path) if self.path else None, "python": self.python,
                "python_version": self.target.python_version, "target": self.target.description}


@dataclass
class Preflight:
    plan: InstallPlan
    env: TargetEnv
    backend: Optional[Backend]
    packages: List[str]
    steps: List[Step] = field(default_factory=list)
    checks: List[IndexCheck] = field(default_factory=list)
    resolution: Optional[Resolution] = None
    problems: List[StageError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> JsonObject:
        """The JSON of `install --json`, credentials in URLs masked (user:****@)."""
        doc: JsonObject = {
            "recipe": self.plan.to_dict(),
            "target": self.env.to_dict(),
            "installer": self.backend.name if self.backend else None,
            "packages": list(self.packages),
            "steps": [s.to_dict() for s in self.steps],
            "index_checks": [c.to_dict() for c in self.checks],
            "resolution": self.resolution.to_dict() if self.resolution else None,
            "problems": [{"ref": p.ref, "what": p.what, "why": p.why, "next": p.next_step}
                         for p in self.problems],
            "ok": self.ok,
        }
        return mask_doc(doc)


# ---------------------------------------------------------------- the target ---------------

def choose_target(opts: InstallOptions, plan: InstallPlan, report: Optional[Facts],
                  replay: bool) -> TargetEnv:
    if replay:
        if opts.apply:
            raise StageError("--apply with --replay: the plan is for another machine",
                             why="a replayed bundle describes the machine it was captured on",
                             next_step="run `mlprobe install --apply` on that machine", ref="E512",
                             kind="usage")
        target = target_from_report(report) if report is not None else None
        if target is None:
            guess = opts.python if opts.python and os.sep not in opts.python else None
            version = guess or f"{sys.version_info[0]}.{sys.version_info[1]}"
            # the captured machine's platform where the capture says it (a Windows capture without
            # Python facts is still a Windows machine), this machine's only where it does not
            import dataclasses

            target = target_from_report(dataclasses.replace(
                report, python=dataclasses.replace(report.python, version=version))) if report is not None else None
            if target is not None:
                plan.warnings.append(f"the bundle has no Python facts: resolved for Python {version} on the "
                                     f"captured machine's platform ({target.platforms[0]})")
            else:
                target = target_for_interpreter(version)
                plan.warnings.append("the bundle has no Python facts and names no platform: resolved for Python "
                                     f"{target.python_version} on this machine's platform instead")
        return TargetEnv(mode="replay", path=None, python="", info=None, target=target)
    if opts.system:
        if opts.venv:
            raise StageError("--system and --venv exclude each other", next_step="keep one", ref="E523",
                             kind="usage")
        base = find_python(opts.python)
        info = inspect_interpreter(base)
        check_system_target(info)
        return TargetEnv(mode="system", path=None, python=info.executable, info=info,
                         target=_target_of(info))
    path = (opts.venv or default_venv_path(plan.recipe)).expanduser().absolute()
    state = check_venv_target(path)
    if state == "venv":
        info = inspect_interpreter(str(venv_python(path)))
        if opts.python and "." in opts.python and os.sep not in opts.python \
                and info.major_minor != opts.python:
            raise StageError(f"{path} runs Python {info.major_minor}, not {opts.python}",
                             next_step="leave out --python to reuse it, or pick another --venv PATH",
                             ref="E527", kind="usage")
        return TargetEnv(mode="venv", path=path, python=info.executable, info=info, target=_target_of(info),
                         state=state)
    base = find_python(opts.python)
    info = inspect_interpreter(base)
    return TargetEnv(mode="new-venv", path=path, python=info.executable, info=info, target=_target_of(info),
                     state=state)


def _target_of(info: Interpreter) -> Target:
    same = os.path.realpath(info.executable) == os.path.realpath(sys.executable) or (
        info.version == "%d.%d.%d" % sys.version_info[:3] and info.implementation == sys.implementation.name)
    return target_for_interpreter(info.version, info.implementation, info.abiflags, same_as_running=same,
                                  executable=info.executable)


# ---------------------------------------------------------------- pre-flight ---------------

def config_file_target(raw: str, venv: Optional[Path]) -> Tuple[Optional[Path], str]:
    """Where --apply writes a recipe's file, or (None, why it does not): only inside the target
    environment, never into the home folder or elsewhere on the machine."""
    if venv is None:
        return None, "there is no venv to hold it"
    path = Path(raw.replace("{venv}", str(venv))).expanduser()
    if not path.is_absolute():
        path = venv / path
    try:
        path.resolve().relative_to(venv.resolve())
    except ValueError:
        return None, "it is outside the venv, and mlprobe writes nothing outside it"
    return path, ""


def plan_steps(plan: InstallPlan, env: TargetEnv, backend: Optional[Backend],
               packages: List[str]) -> List[Step]:
    steps: List[Step] = []
    py = env.python
    if env.mode == "new-venv" and env.path is not None:
        py = str(venv_python(env.path))
        by_uv = backend is not None and backend.name == "uv" and backend.uv is not None
        argv = ["uv", "venv", "--python", env.python, str(env.path)] if by_uv else \
            [env.python, "-m", "venv", str(env.path)]
        steps.append(Step("venv", f"create a virtual environment {env.path} "
                          f"(Python {env.target.python_version})"
                          + (" with uv, pip put in from the interpreter's own wheel" if by_uv else ""),
                          shell.command(argv, os.name == "nt")))
    elif env.mode == "venv":
        steps.append(Step("venv", f"reuse the virtual environment {env.path} "
                          f"(Python {env.target.python_version}); its packages are saved first and restored "
                          "if anything fails"))
    elif env.mode == "system":
        steps.append(Step("venv", f"install into the interpreter {env.python} itself (--system)"))
    if plan.lock_file:
        shown_lock = Backend(backend.name, py, backend.pip, backend.uv).display(
            plan.pip_args, plan.sources) if backend is not None else None
        steps.append(Step("install", f"install the files of the lock {plan.lock_file} from "
                          f"{plan.sources.describe()} (exact versions, sha256 checked, no other dependency)",
                          shown_lock))
    elif backend is not None and env.mode != "replay":
        b = Backend(backend.name, py, backend.pip, backend.uv)
        if backend.name == "uv":
            shown = b.display([], plan.sources, resolved_file=LOCK_NAME)
            how = "exactly the resolution below (uv's pylock.toml: those files, each checked by its sha256)"
        else:
            shown = b.display([], plan.sources, resolved_file="resolution.txt")
            how = ("exactly the resolution below (pip's report as name==version --hash lines, --no-deps: "
                   "those files, each checked by its sha256)")
        steps.append(Step("install", f"install {how} with {backend.name} from {plan.sources.describe()}",
                          shown))
    elif backend is not None:
        shown = Backend(backend.name, py, backend.pip, backend.uv).display(packages + plan.pip_args,
                                                                             plan.sources)
        steps.append(Step("install", f"install {len(packages)} requirement(s) with {backend.name} from "
                          f"{plan.sources.describe()}", shown))
    else:
        steps.append(Step("install", f"install: {' '.join(packages)} from {plan.sources.describe()}"))
    for shim in plan.shims:
        steps.append(Step("shim", f"install mlprobe's compatibility shim '{shim}' into the environment"))
    if plan.env:
        if env.mode == "system":
            for line in activate.shell_lines(plan.env):
                steps.append(Step("env", "set before use (mlprobe does not edit shell rc files)", line))
        else:
            for k, v in plan.env.items():
                steps.append(Step("env", f"{k}={v} set at every start of the venv's Python: its start-up hook "
                                  "(_mlprobe_startup.pth; MLPROBE_HOOK=0 turns it off), its activate scripts"
                                  " and its Jupyter kernel spec (when it has ipykernel)"))
    for f in plan.config_files:
        path, why_not = config_file_target(f["path"], env.path)
        if path is not None:
            steps.append(Step("file", f"write {path}", f["content"][:200]))
        else:
            # what --apply really does: a file outside the environment is never written (the
            # settings above carry the same choice); the content is shown for whoever wants it
            carried = "; the settings above carry the same choice" if plan.env else ""
            steps.append(Step("file", f"{f['path']} is not written ({why_not}){carried}; its content, to "
                              "write it yourself:", f["content"][:200]))
    for imp in plan.imports:
        steps.append(Step("check", f"import {imp} in the environment (a failure rolls the install back)"))
    fw = _verify_framework(plan)
    if fw and plan.device and plan.device.lower() != "cpu" and env.mode != "replay":
        steps.append(Step("check", f"{fw}'s own device list, in the environment activate gives, must hold "
                          f"{plan.device}; if not, a known fix inside the environment is applied and checked "
                          "again, else the install rolls back (--keep-without-device keeps it)"))
    if fw and env.mode != "replay":
        shown = shell.command(["mlprobe", "verify", "--framework", fw, "--python", py], os.name == "nt")
        steps.append(Step("verify", f"`{shown}` in the environment"))
    return steps


def prepare(plan: InstallPlan, opts: InstallOptions, report: Optional[Facts] = None,
            replay: bool = False, on_progress: Optional[Callable[[str], None]] = None) -> Preflight:
    """Everything that can be known before installing. Writes nothing to disk."""
    say = on_progress or (lambda _s: None)
    env = choose_target(opts, plan, report, replay)
    if plan.lock_file and plan.lock_requirements is None and env.python:
        say(f"reading the lock {plan.lock_file}")
        req, _lock, lines = keep.requirements_from_lock(Path(plan.lock_file), env.python, env.target.tags)
        plan.lock_requirements = str(req)
        plan.pip_args += ["--no-deps", "--require-hashes", "-r", str(req)]
        plan.notes.append(f"from the lock: {len(lines)} file(s), each checked against its sha256")
    if plan.python_spec:
        try:
            if not SpecifierSet(plan.python_spec).contains(env.target.python_version, prereleases=True):
                raise StageError(
                    f"recipe {plan.recipe} needs Python {plan.python_spec}; "
                    f"the target is {env.target.python_version}",
                    next_step="pass --python X.Y with a version that fits "
                              "(that interpreter must be installed)",
                    ref="E528", kind="unavailable")
        except InvalidSpecifier:
            plan.warnings.append(f"the recipe's python requirement {plan.python_spec!r} is unreadable")
    backend: Optional[Backend] = None
    if env.mode != "replay" and env.info is not None:
        pip_only = needs_pip(plan.sources, plan.variant_label)
        backend = choose_backend(opts.installer, plan.sources, env.python, env.info.has_pip, pip_only)
        if pip_only and opts.installer == "uv":
            raise StageError("--use-pip-config needs pip", why="uv does not read pip's configuration",
                             next_step="leave out --installer uv", ref="E523", kind="usage")
    aside = set_aside(plan.sources, backend.name if backend else "pip")
    if aside:
        plan.notes.append("set aside for this install (they would add sources or packages the recipe does "
                          "not name): " + "; ".join(aside))
    pip_cmd = list(backend.pip) if backend and backend.pip else [sys.executable, "-m", "pip"]
    packages = [] if plan.lock_requirements else list(plan.packages)
    pre = Preflight(plan=plan, env=env, backend=backend, packages=packages)
    other_python = env.mode == "replay"
    indexes = plan.sources.checkable_indexes
    variant = bool(plan.variant_label) and plan.sources.origin != "recipe" and not plan.lock_requirements
    # One index and nothing else: the page its check reads lists every build pip or uv could pick, so
    # the variant's pin is read from it (no `pip index versions`, a second pip start).
    pin_from_checks = variant and len(indexes) == 1 and not plan.sources.find_links
    if variant and not pin_from_checks:
        say(f"looking for the +{plan.variant_label} builds in {plan.sources.describe()}")
        try:
            packages, notes = pin_variants(pip_cmd, packages, plan.variant_label or "", plan.sources,
                                           python_version=env.target.major_minor if other_python else None)
            plan.notes.extend(notes)
            pre.packages = packages
        except StageError as exc:
            pre.problems.append(_masked(exc))
    # Index checks: one short request per (index, requirement), concurrently.
    if indexes:
        say(f"checking {', '.join(indexes)}")
        jobs = [(u, p) for u in indexes[:1] for p in pre.packages]
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(jobs)))) as pool:
            pre.checks = list(pool.map(
                lambda j: check_index(j[0], j[1], env.target, timeout=opts.check_timeout_s), jobs))
    if pin_from_checks:
        _pin_from_checks(pre, plan.variant_label or "", env)
    pre.steps = plan_steps(plan, env, backend, pre.packages)
    blocking = [c for c in pre.checks if not c.ok and not plan.sources.extra_index_urls
                and not plan.sources.find_links]
    for c in blocking[:1]:
        nxt = offline_hint() if c.ref == "E501" else (
            "pass --python X.Y for an interpreter these wheels support, or pick another recipe (--recipe ID)"
            if c.ref == "E503" else "check the URL; or use another source: " + offline_hint())
        pre.problems.append(StageError(f"index check failed: {c.message}",
                                       why=f"{c.index_url} for {c.requirement}",
                                       next_step=nxt, ref=c.ref or "E501", kind="unavailable"))
    if blocking:
        pre.resolution = Resolution(ok=False, skipped="the index does not answer" if not blocking[0].reachable
                                    else "an index check failed")
        return pre
    if pre.problems and any(p.ref == "E514" for p in pre.problems):
        pre.resolution = Resolution(ok=False, skipped="no build of the recipe's variant in the sources")
        return pre
    if backend is not None and backend.name == "uv" and backend.uv and env.mode != "replay":
        # the installer that --apply will run resolves, with the same sources and options
        say("resolving (uv pip compile to a pylock.toml, which --apply installs as it is)")
        res = uv_dry_run(backend.uv, env.python, pre.packages, plan.sources, backend.env(plan.sources),
                         extra=plan.pip_args)
    elif env.mode == "replay":
        say("resolving (pip install --dry-run)")
        res = dry_run(pip_cmd, pre.packages, plan.sources, ignore_installed=True,
                      python_version=env.target.major_minor, platforms=env.target.platforms[:12])
    else:
        say("resolving (pip install --dry-run)")
        res = dry_run(pip_cmd, pre.packages + plan.pip_args, plan.sources,
                      ignore_installed=env.mode == "new-venv", cache=opts.apply)
    if res.ok:
        known: Dict[str, int] = {}
        for c in pre.checks:
            known.update(c.sizes)
        fill_sizes(res.dists, known)
    elif res.failure is not None and not pre.problems:
        pre.problems.append(_masked(res.failure.to_error("unavailable")))
    pre.resolution = res
    return pre


def _pin_from_checks(pre: Preflight, label: str, env: TargetEnv) -> None:
    """Pin each build-variant project to its newest +label build on the one index, read from the page
    its index check fetched; the check is then read again for the pinned requirement."""
    out: List[str] = []
    for spec, check in zip(list(pre.packages), list(pre.checks)):
        if not needs_variant(spec) or not check.files:  # a page that did not read: its check says why
            out.append(spec)
            continue
        try:
            pinned, note = variant_pin(spec, check.versions, label, pre.plan.sources)
        except StageError as exc:
            pre.problems.append(_masked(exc))
            out.append(spec)
            continue
        pre.plan.notes.append(note)
        out.append(pinned)
        pre.checks[pre.checks.index(check)] = recheck(check, pinned, env.target)
    pre.packages = out


def _masked(exc: StageError) -> StageError:
    """The error with every URL's credentials masked (pip's and uv's output included)."""
    exc.what = mask_credentials(exc.what)
    exc.why = mask_credentials(exc.why) if exc.why else exc.why
    exc.next_step = mask_credentials(exc.next_step) if exc.next_step else exc.next_step
    return exc


def _verify_framework(plan: InstallPlan) -> Optional[str]:
    from ..model.vocabulary import vocabulary

    fw = vocabulary().framework(plan.verify_framework or plan.framework)
    return fw.verify if fw is not None else None
