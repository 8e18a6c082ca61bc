"""The pre-flight (what `mlprobe install` shows, writing nothing) and the --apply sequence.

prepare():  target interpreter -> build variant pins -> index checks -> dry-run resolution.
apply():    [new venv] -> snapshot -> save what will be replaced -> install -> shims -> env vars in
            activate scripts -> config files -> import check -> commit; then verify in that venv.
Any exception inside the transaction (Ctrl-C and SIGTERM included) restores the environment.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..errors import StageError
from ..model import shell
from ..urls import mask_credentials, mask_doc
from . import activate, keep
from .backends import Backend, choose_backend, needs_pip, pip_command, set_aside
from .lock import LOCK_NAME
from .pin import PinSet
from .index import IndexCheck, Target, check_index, offline_hint, target_for_interpreter, target_from_report
from .proc import StepTimeout, Transcript, run_logged, run_quiet
from .resolve import (Failure, Resolution, classify_failure, dry_run, fill_sizes, installed_names, pin_variants,
                      uv_dry_run)
from .steps import InstallOptions, InstallPlan, Step
from .transaction import RestoreReport, Transaction
from .venv import (
    Interpreter,
    check_system_target,
    check_venv_target,
    create_venv_argv,
    default_venv_path,
    find_python,
    inspect_interpreter,
    venv_python,
)

IMPORT_CHECK_TIMEOUT_S = 600.0
VENV_TIMEOUT_S = 300.0


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

    def to_dict(self) -> Dict[str, Any]:
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

    def to_dict(self) -> Dict[str, Any]:
        """The JSON of `install --json`, credentials in URLs masked (user:****@)."""
        return mask_doc({
            "recipe": self.plan.to_dict(),
            "target": self.env.to_dict(),
            "installer": self.backend.name if self.backend else None,
            "packages": self.packages,
            "steps": [s.to_dict() for s in self.steps],
            "index_checks": [c.to_dict() for c in self.checks],
            "resolution": self.resolution.to_dict() if self.resolution else None,
            "problems": [{"ref": p.ref, "what": p.what, "why": p.why, "next": p.next_step}
                         for p in self.problems],
            "ok": self.ok,
        })


# ---------------------------------------------------------------- the target ---------------

def choose_target(opts: InstallOptions, plan: InstallPlan, report: Optional[Dict[str, Any]],
                  replay: bool) -> TargetEnv:
    if replay:
        if opts.apply:
            raise StageError("--apply with --replay: the plan is for another machine",
                             why="a replayed bundle describes the machine it was captured on",
                             next_step="run `mlprobe install --apply` on that machine", ref="E512",
                             kind="usage")
        target = target_from_report(report or {}) if report else None
        if target is None:
            guess = opts.python if opts.python and os.sep not in opts.python else None
            target = target_for_interpreter(guess or f"{sys.version_info[0]}.{sys.version_info[1]}")
            plan.warnings.append("the bundle has no Python facts: resolved for Python "
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

def plan_steps(plan: InstallPlan, env: TargetEnv, backend: Optional[Backend],
               packages: List[str]) -> List[Step]:
    steps: List[Step] = []
    py = env.python
    if env.mode == "new-venv" and env.path is not None:
        py = str(venv_python(env.path))
        steps.append(Step("venv", f"create a virtual environment {env.path} "
                          f"(Python {env.target.python_version})",
                          shell.command([env.python, "-m", "venv", str(env.path)], os.name == "nt")))
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
                steps.append(Step("env", f"{k}={v} written into the venv's activate scripts "
                                  "(bin/activate, activate.fish, Activate.ps1, Scripts\\activate.bat)"))
    for f in plan.config_files:
        steps.append(Step("file", f"write {f['path']}", f["content"][:200]))
    for imp in plan.imports:
        steps.append(Step("check", f"import {imp} in the environment (a failure rolls the install back)"))
    for c in plan.commands:
        steps.append(Step("note", "the recipe's own command (shown, not run)", c))
    fw = _verify_framework(plan)
    if fw and plan.device and plan.device.lower() != "cpu" and env.mode != "replay":
        steps.append(Step("check", f"{fw}'s own device list, in the environment activate gives, must hold "
                          f"{plan.device}; if not, a known fix inside the environment is applied and checked "
                          "again, else the install rolls back (--keep-without-device keeps it)"))
    if fw and env.mode != "replay":
        shown = shell.command(["mlprobe", "verify", "--framework", fw, "--python", py], os.name == "nt")
        steps.append(Step("verify", f"`{shown}` in the environment"))
    return steps


def prepare(plan: InstallPlan, opts: InstallOptions, report: Optional[Dict[str, Any]] = None,
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
    if plan.variant_label and plan.sources.origin != "recipe" and not plan.lock_requirements:
        say(f"looking for the +{plan.variant_label} builds in {plan.sources.describe()}")
        try:
            packages, notes = pin_variants(pip_cmd, packages, plan.variant_label, plan.sources,
                                           python_version=env.target.major_minor if other_python else None)
            plan.notes.extend(notes)
            pre.packages = packages
        except StageError as exc:
            pre.problems.append(_masked(exc))
    pre.steps = plan_steps(plan, env, backend, pre.packages)
    # Index checks: one short request per (index, requirement), concurrently.
    indexes = plan.sources.checkable_indexes
    if indexes:
        say(f"checking {', '.join(indexes)}")
        jobs = [(u, p) for u in indexes[:1] for p in pre.packages]
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(jobs)))) as pool:
            pre.checks = list(pool.map(
                lambda j: check_index(j[0], j[1], env.target, timeout=opts.check_timeout_s), jobs))
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
        say("resolving (uv, as --apply will install)")
        res = uv_dry_run(backend.uv, env.python, pre.packages, plan.sources, backend.env(plan.sources),
                         fresh=env.mode == "new-venv", extra=plan.pip_args)
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


# ---------------------------------------------------------------- apply --------------------

@dataclass(frozen=True)
class ApplyResult:
    """What `install --apply` did (the install stage's result; `to_dict` is its JSON)."""
    path: Optional[Path]
    python: str
    installed: Tuple[str, ...]
    activate_scripts: Tuple[str, ...]
    log: Optional[Path]
    import_ok: bool
    verify: Optional[Mapping[str, Any]] = None
    verify_error: Optional[str] = None
    seconds: float = 0.0
    device_note: Optional[str] = None  # kept although the framework does not list the device
    pins: Tuple[str, ...] = ()  # the builds kept (pin.py), as name==version
    pins_file: Optional[str] = None
    lock: Optional[str] = None  # the pylock.toml written (lock.py)
    lock_error: Optional[str] = None
    remarks: Tuple[str, ...] = ()

    def to_dict(self) -> Dict[str, Any]:
        return mask_doc({"path": str(self.path) if self.path else None, "python": self.python,
                "installed": list(self.installed), "activate_scripts": list(self.activate_scripts),
                "log": str(self.log) if self.log else None, "import_ok": self.import_ok,
                "verify": dict(self.verify) if self.verify is not None else None, "verify_error": self.verify_error,
                "seconds": round(self.seconds, 1), "device_note": self.device_note,
                "pins": list(self.pins), "pins_file": self.pins_file, "lock": self.lock,
                "lock_error": self.lock_error, "remarks": list(self.remarks)})


def default_log_path(recipe: str) -> Path:
    from .guard import cache_base

    base = cache_base() / "mlprobe" / "logs"
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in recipe)
    return base / f"install-{safe}-{time.strftime('%Y%m%d-%H%M%S')}.log"


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP (the terminal or the ssh session closed): rolled back like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def target_name(env: "TargetEnv") -> str:
    """What the lock and the journal are keyed on: the venv folder, or the interpreter itself."""
    return str(env.path) if env.path is not None else env.python


class _SignalsAsInterrupt:
    """SIGTERM and SIGHUP become an interrupt inside the transaction, so both roll back."""

    def __enter__(self) -> "_SignalsAsInterrupt":
        self.old: Dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return self

        def handler(signum: int, frame: Any) -> None:
            raise Stopped(signum)

        for name in ("SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                self.old[sig] = signal.signal(sig, handler)
            except (ValueError, OSError):
                continue
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self.old.items():
            signal.signal(sig, old)


def _run_step(argv: List[str], transcript: Transcript, progress: Progress, timeout: float,
              env: Optional[Dict[str, str]] = None, on_start: Any = None) -> Any:
    try:
        return run_logged(argv, timeout=timeout, transcript=transcript, env=env,
                          on_line=lambda line: progress.line(mask_credentials(line)), on_start=on_start)
    except StepTimeout as exc:
        raise StageError(f"{os.path.basename(argv[0])} did not finish within {exc.seconds:g} s",
                         why=" ".join(argv[:6]) + " …", next_step="raise --timeout, or check the network",
                         ref="E515", kind="failure") from None


def apply(pre: Preflight, opts: InstallOptions, progress: Optional[Progress] = None,
          on_child: Optional[Callable[[Any], None]] = None) -> ApplyResult:
    """Carry out the plan. Raises StageError (with the environment restored) on any failure."""
    if not pre.ok:
        raise pre.problems[0]
    progress = progress or Progress()
    plan, env = pre.plan, pre.env
    started = time.perf_counter()
    log_path = opts.log or default_log_path(plan.recipe)
    if opts.log is None:
        from .guard import private_dir

        private_dir(log_path.parent)  # mlprobe's own log folder: for this user only (0700)
    transcript = Transcript(log_path)
    transcript.note(f"mlprobe install --apply: recipe {plan.recipe} ({plan.title})")
    transcript.note(f"target: {env.mode} {env.path or env.python}; sources: {plan.sources.describe()}")
    assert pre.backend is not None
    info = env.info
    assert info is not None
    journal = target_name(env)
    if env.mode == "new-venv":
        assert env.path is not None
        txn = Transaction(transcript, new_venv=env.path, new_venv_was_empty_dir=env.state == "empty",
                          journal=journal)
    elif env.mode == "venv":
        assert env.path is not None
        txn = Transaction(transcript, env_python=env.python, roots=[env.path], journal=journal,
                          marker_root=env.path)
    else:
        roots = sorted({Path(p) for p in (info.purelib, info.platlib, info.scripts) if p})
        txn = Transaction(transcript, env_python=env.python, roots=roots, shallow=[Path(info.prefix)],
                          journal=journal)
    python = env.python
    scripts_written: List[str] = []
    import_ok = False
    device_note: Optional[str] = None
    pinset: Optional[PinSet] = None
    remarks: List[str] = []
    try:
        with _SignalsAsInterrupt(), txn:
            if env.mode == "new-venv":
                assert env.path is not None
                progress.step(f"creating {env.path}")
                txn.claim_new_venv()
                assert txn.new_venv is not None  # the real folder: `python -m venv` does not follow a link
                r = _run_step(create_venv_argv(env.python, txn.new_venv, opts.with_pip), transcript, progress,
                              VENV_TIMEOUT_S)
                if r.rc != 0:
                    no_venv_module = "ensurepip" in r.output or "No module named venv" in r.output
                    raise StageError(f"could not create the venv {env.path}", why=r.output.strip()[-300:],
                                     next_step=("on Debian/Ubuntu: `apt install python3-venv`; or pass --venv PATH"
                                                if no_venv_module else "pass another --venv PATH"),
                                     ref="E509", kind="failure")
                python = str(venv_python(env.path))
                info = inspect_interpreter(python)
                progress.done(f"created {env.path} (Python {info.version})")
            backend = choose_backend(opts.installer, plan.sources, python, info.has_pip,
                                     needs_pip(plan.sources, plan.variant_label))
            txn.begin()
            if env.path is not None:
                keep.lift_pins(env.path, txn, transcript)
            if pre.resolution is not None and pre.resolution.ok:
                txn.protect_dists(installed_names(pre.resolution.dists))
            progress.step(f"installing with {backend.name}: {' '.join(pre.packages)}")
            argv = backend.install_argv(pre.packages, plan.sources, plan.pip_args)
            if env.mode != "system" and python not in argv[:6]:  # never the wrong interpreter
                raise StageError("internal error: the install command does not name the venv's python",
                                 why=" ".join(argv[:6]), ref="E000", kind="failure")
            r = _run_step(argv, transcript, progress, opts.timeout_s, env=backend.env(plan.sources),
                          on_start=on_child)
            if r.rc != 0:
                failure = _diagnose(classify_failure(r.output, backend.name, "installing"), pre)
                raise failure.to_error("failure")
            progress.done(f"installed with {backend.name} in {r.seconds:.0f} s")
            for shim in plan.shims:
                progress.step(f"installing the shim {shim}")
                _install_shim(shim, info, transcript)
                progress.done(f"shim {shim} installed")
            if plan.env and env.mode != "system":
                scripts_written = _write_activate(plan, info, txn, transcript)
                progress.done(f"{', '.join(plan.env)} written into {len(scripts_written)} activate script(s)")
            for f in plan.config_files:
                _write_config(f, env, txn, transcript)
            check_env = _env_after_activate(plan, env, info)
            for imp in plan.imports:
                progress.step(f"checking `import {imp}` in the environment")
                code = f"import {imp}; print(getattr({imp.split('.')[0]}, '__version__', ''))"
                r = _run_step([python, "-c", code], transcript, progress, IMPORT_CHECK_TIMEOUT_S,
                              env=check_env)
                if r.rc != 0:
                    last = next((ln for ln in reversed(r.output.strip().splitlines()) if ln.strip()), "")
                    raise StageError(f"installed, but `import {imp}` fails in the environment",
                                     why=last[:300],
                                     next_step="see the transcript log; this build may not run on this "
                                                 "machine (`mlprobe plan` lists the alternatives)",
                                     ref="E516", kind="failure")
                shown_version = r.output.strip().splitlines()[-1] if r.output.strip() else ""
                progress.done(f"import {imp} works ({shown_version})")
            import_ok = True
            if opts.device_check and env.mode != "replay":
                device_note, fixed_scripts = _device_check(plan, env, info, python, check_env, txn,
                                                           transcript, progress, opts)
                scripts_written = sorted(set(scripts_written) | set(fixed_scripts))
            if env.path is not None:
                pinset, remarks = keep.pin_installed(plan, python, env.path, backend.pip or keep.running_pip(),
                                                     txn, transcript)
                progress.done(f"pinned {', '.join(p.requirement for p in pinset.pins)} in {pinset.file}")
    except KeyboardInterrupt as exc:
        summary = txn.report.summary() if txn.report else "nothing had changed yet"
        how = (f"stopped by {signal.Signals(exc.signum).name}" if isinstance(exc, Stopped)
               else "interrupted (Ctrl-C)")
        transcript.note(how)
        transcript.close()
        progress.close()
        raise StageError(f"{how} while installing", why=summary,
                         next_step=f"run the same command again when ready; the log is {log_path}",
                         ref="E507", kind="interrupted") from None
    except StageError as exc:
        _masked(exc)
        summary = txn.report.summary() if txn.report else ""
        transcript.note(f"failed [{exc.ref}]: {exc.what}")
        transcript.close()
        progress.close()
        if exc.ref != "E511":
            exc.why = "; ".join(x for x in (exc.why, summary) if x)
            exc.next_step = "; ".join(x for x in (exc.next_step, f"the log is {log_path}") if x)
        raise
    dists = pre.resolution.dists if pre.resolution else []
    lock_path, lock_error = _write_lock(plan, env, python, backend, [d.name for d in dists], log_path, transcript,
                                        progress)
    verify_doc: Optional[Dict[str, Any]] = None
    verify_error: Optional[str] = None
    if opts.verify:
        assert info is not None
        verify_doc, verify_error = _verify(plan, python, transcript, progress,
                                           _env_after_activate(plan, env, info))
    transcript.close()
    return ApplyResult(path=env.path if env.mode != "system" else None, python=python,
                       installed=tuple(f"{d.name}=={d.version}" for d in dists),
                       activate_scripts=tuple(scripts_written), log=log_path, import_ok=import_ok,
                       verify=verify_doc, verify_error=verify_error,
                       seconds=time.perf_counter() - started,
                       pins=tuple(p.requirement for p in pinset.pins) if pinset else (),
                       pins_file=str(pinset.file) if pinset else None, lock=lock_path, lock_error=lock_error,
                       remarks=tuple(remarks), device_note=device_note)


def _write_activate(plan: InstallPlan, info: Interpreter, txn: Transaction, transcript: Transcript) -> List[str]:
    """The recipe's variables (and a device-check fix's) into every activate script, each saved first."""
    for p in activate.activate_scripts(Path(info.scripts)):
        txn.protect_file(p)
    written = [str(p) for p in activate.write_env(Path(info.scripts), plan.env, plan.prepend)]
    transcript.note("env vars written into: " + ", ".join(written))
    return written


def _device_check(plan: InstallPlan, env: TargetEnv, info: Interpreter, python: str,
                  check_env: Dict[str, str], txn: Transaction, transcript: Transcript, progress: Progress,
                  opts: InstallOptions) -> Tuple[Optional[str], List[str]]:
    """The framework's own enumeration, in the environment `activate` gives, must list the recipe's
    device. If it does not: diagnose, apply a fix that stays inside the venv where one is known,
    check again; then keep it only with --keep-without-device (said), else fail (the transaction rolls
    back). Returns (a note when kept without the device, activate scripts the fix rewrote)."""
    from ..verify.devicecheck import diagnose, framework_loader, list_devices, probe_loaders

    fw = _verify_framework(plan)
    request = plan.device
    if not fw or not request or request.lower() == "cpu" or "{" in request:
        return None, []
    from ..model.vocabulary import vocabulary

    if fw not in vocabulary().payload_frameworks():
        return None, []
    progress.step(f"checking that {fw} lists {request} in the environment")
    extra = {k: v for k, v in check_env.items() if os.environ.get(k) != v}
    listing = list_devices(python, fw, extra)
    transcript.note(f"device check: {fw} lists {', '.join(listing.ids) or 'nothing'}"
                    + (f" ({listing.error})" if listing.error else ""))
    if listing.sees(request):
        progress.done(f"{fw} lists {request}")
        return None, []
    loaders = probe_loaders(python, extra) if framework_loader(fw) else None
    venv = str(env.path) if env.path is not None and env.mode != "system" else None
    diag = diagnose(fw, request, listing, check_env, loaders_doc=loaders, venv=venv)
    transcript.note(f"device check: {request} is not listed; {diag.cause}")
    for line in diag.evidence:
        transcript.note(f"  {line}")
    progress.done(f"{fw} does not list {request}: {diag.cause}", ok=False)
    written: List[str] = []
    if diag.fix is not None and venv is not None:
        fix = diag.fix
        progress.step(f"fixing inside the environment: {fix.what}")
        _apply_fix(fix, Path(venv), python, extra, txn, transcript)
        plan.env.update(fix.env)
        plan.prepend.update(fix.prepend)
        written = _write_activate(plan, info, txn, transcript)
        check_env.clear()
        check_env.update(_env_after_activate(plan, env, info))
        extra = {k: v for k, v in check_env.items() if os.environ.get(k) != v}
        again = list_devices(python, fw, extra)
        transcript.note(f"device check after the fix: {fw} lists {', '.join(again.ids) or 'nothing'}")
        if again.sees(request):
            plan.notes.append(f"{fw} did not list {request}: {diag.cause}. Fixed inside the environment: "
                              f"{fix.what}")
            progress.done(f"fixed: {fw} now lists {request}")
            return None, written
        progress.done(f"the fix did not help: {fw} lists {', '.join(again.ids) or 'nothing'}", ok=False)
        listing = again
    listed = ", ".join(listing.ids) or "no device"
    if opts.keep_without_device:
        note = (f"{fw} does not list {request} (it lists {listed}): {diag.cause}. Kept anyway "
                "(--keep-without-device): it will run on what it lists")
        plan.warnings.append(note)
        transcript.note(note)
        return note, written
    raise StageError(f"{fw} does not list {request} in the new environment",
                     why=f"it lists {listed}; {diag.cause}",
                     next_step=(diag.next_step + "; " if diag.next_step else "")
                     + "to keep the environment without that device: --keep-without-device",
                     ref="E540", kind="failure")


def _apply_fix(fix: Any, venv: Path, python: str, env: Dict[str, str], txn: Transaction,
               transcript: Transcript) -> None:
    """Write a device-check fix's files inside the venv (each recorded by the transaction)."""
    for rel, target in fix.links.items():
        link = venv / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        txn.protect_file(link)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
        transcript.note(f"linked {link} -> {target}")
    folder = fix.env.get("OCL_ICD_VENDORS")
    if folder:
        # the scan's OpenCL child knows how to list the ICDs a Khronos loader would load; it runs in a
        # child with the environment's variables, because it opens each ICD library once
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        for old in sorted(path.glob("*.icd")):  # what an earlier fix wrote goes: the folder is rewritten
            txn.protect_file(old)
            old.unlink()
        from ..scan.live import opencl_child

        r = run_quiet([sys.executable, "-S", opencl_child.__file__, "--vendors-dir", str(path)], timeout=60.0,
                      env=dict(os.environ, **env))
        transcript.note(f"vendors folder {path}: {', '.join(p.name for p in sorted(path.glob('*.icd')))}"
                        + (f" ({r.stderr.strip()[-200:]})" if r.returncode != 0 else ""))


def _write_lock(plan: InstallPlan, env: TargetEnv, python: str, backend: Backend, names: List[str],
                log_path: Path, transcript: Transcript, progress: Progress) -> Tuple[Optional[str], Optional[str]]:
    """(the lock written, or None and why not): a lock that cannot be made does not undo the install."""
    dest = env.path / LOCK_NAME if env.path is not None else \
        log_path.with_name(log_path.stem.replace("install-", "pylock.", 1) + ".toml")
    progress.step(f"writing the lock {dest}")
    try:
        out = keep.lock_installed(plan, python, names, backend.pip or keep.running_pip(), dest, transcript)
    except StageError as exc:
        transcript.note(f"no lock written: {exc.what} ({exc.why})")
        progress.done(f"no lock written: {exc.what}", ok=False)
        return None, f"{exc.what}: {exc.why}" if exc.why else exc.what
    except Exception as exc:  # the network, a file system: the install itself stands
        transcript.note(f"no lock written: {exc}")
        progress.done("no lock written", ok=False)
        return None, str(exc)[:300]
    progress.done(f"lock written: {out}")
    return str(out), None


def _masked(exc: StageError) -> StageError:
    """The error with every URL's credentials masked (pip's and uv's output included)."""
    exc.what = mask_credentials(exc.what)
    exc.why = mask_credentials(exc.why) if exc.why else exc.why
    exc.next_step = mask_credentials(exc.next_step) if exc.next_step else exc.next_step
    return exc


def _env_after_activate(plan: InstallPlan, env: TargetEnv, info: Interpreter) -> Dict[str, str]:
    """The environment the person has after `activate` (for --system: after setting the recipe's
    variables by hand, as the steps say): every check in the environment runs with it."""
    if env.mode == "system" or env.path is None:
        return activate.activated_env(os.environ, None, None, plan.env, plan.prepend)
    return activate.activated_env(os.environ, env.path, Path(info.scripts), plan.env, plan.prepend)


def _verify_framework(plan: InstallPlan) -> Optional[str]:
    from ..model.vocabulary import vocabulary

    fw = vocabulary().framework(plan.verify_framework or plan.framework)
    return fw.verify if fw is not None else None


def _diagnose(failure: Failure, pre: Preflight) -> Failure:
    """pip says only "no matching distribution" when an index stops answering (with retries off it
    does not even warn): ask the index once more to tell the two apart."""
    indexes = pre.plan.sources.checkable_indexes
    if failure.kind != "not-found" or not indexes or not pre.packages:
        return failure
    check = check_index(indexes[0], pre.packages[0], pre.env.target, timeout=4.0)
    if check.reachable:
        return failure
    return Failure("network", "the index stopped answering while installing", check.message,
                   offline_hint(), "E501")


def _install_shim(shim: str, info: Interpreter, transcript: Transcript) -> None:
    if shim not in ("plaidml-collections", "plaidml", "plaidml-compat"):
        raise StageError(f"unknown shim {shim!r} in the recipe", next_step="fix the recipe data",
                         ref="E513", kind="usage")
    try:
        from ..shims.plaidml_compat import install_shim
    except ImportError as exc:
        raise StageError("this mlprobe has no PlaidML compatibility shim", why=str(exc),
                         next_step="update mlprobe", ref="E529", kind="unavailable") from None
    out = install_shim(info.purelib)
    transcript.note(f"shim {shim} installed into {info.purelib}: {out}")


def _write_config(f: Dict[str, str], env: TargetEnv, txn: Transaction, transcript: Transcript) -> None:
    raw = f["path"]
    if env.path is None:
        transcript.note(f"config file {raw} not written (no venv); its content is in the plan")
        return
    path = Path(raw.replace("{venv}", str(env.path))).expanduser()
    if not path.is_absolute():
        path = env.path / path
    try:
        path.resolve().relative_to(env.path.resolve())
    except ValueError:
        transcript.note(f"config file {path} is outside the venv: not written (shown in the plan)")
        return
    txn.protect_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f["content"], encoding="utf-8")
    transcript.note(f"wrote {path}")


def _verify(plan: InstallPlan, python: str, transcript: Transcript, progress: Progress,
            env: Dict[str, str]) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """(verify's result, None), or (None, why verify gave none)."""
    fw = _verify_framework(plan)
    if not fw:
        return None, f"no verify for framework {plan.framework or '?'}"
    try:
        from ..verify.runner import run_verify
    except ImportError as exc:
        return None, f"verify is not available in this mlprobe ({exc})"
    progress.step(f"verifying {fw} in {python}")

    def on_event(ev: Dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind in ("stage", "device_done", "discover"):
            progress.line(" ".join(str(ev.get(k)) for k in ("framework", "device", "stage") if ev.get(k)))

    try:
        extra = {k: v for k, v in env.items() if os.environ.get(k) != v}
        doc = run_verify(python=python, framework=fw, device=plan.device, on_event=on_event, env=extra)
    except StageError as exc:
        transcript.note(f"verify failed: {exc.what}")
        progress.done("verify could not run", ok=False)
        return None, exc.render()
    except KeyboardInterrupt:
        progress.done("verify interrupted", ok=False)
        return None, "verify interrupted (the install itself is complete)"
    for line in doc.get("summary") or []:
        transcript.note(f"verify: {line}")
    progress.done("verify finished", ok=doc.get("exit_code") == 0)
    return doc, None


__all__ = ["prepare", "apply", "Preflight", "ApplyResult", "Progress", "TargetEnv", "RestoreReport",
           "pip_command"]
