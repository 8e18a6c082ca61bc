"""The --apply sequence, after the pre-flight (preflight.py: what `mlprobe install` shows, writing
nothing; prepare() is re-exported here).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from packaging.utils import canonicalize_name

from ..errors import StageError
from ..model.jsontypes import JsonObject
from ..model.verify import VerifyResult
from ..urls import mask_credentials, mask_doc
from . import keep
from ..venvconf import activate
from .backends import Backend, choose_backend, needs_pip, pip_command, source_args
from .index import check_index, offline_hint
from .lock import LOCK_NAME, sha256_of
from .pin import PinSet
from .preflight import Preflight as Preflight, Progress as Progress, TargetEnv as TargetEnv
from .preflight import _masked, _verify_framework, prepare as prepare
from .preflight import choose_target as choose_target, plan_steps as plan_steps
from .proc import StepTimeout, Transcript, run_logged, run_quiet
from .resolve import Failure, Resolution, ResolvedDist, classify_failure, installed_names
from .steps import InstallOptions, InstallPlan
from .transaction import RestoreReport, Transaction
from .venv import (Interpreter, bundled_pip_wheel, create_venv_argv, inspect_interpreter, uv_seed_pip_argv,
                   uv_venv_argv, venv_python)

IMPORT_CHECK_TIMEOUT_S = 600.0
VENV_TIMEOUT_S = 300.0


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
    verify: Optional[VerifyResult] = None
    verify_error: Optional[str] = None
    seconds: float = 0.0
    device_note: Optional[str] = None  # kept although the framework does not list the device
    pins: Tuple[str, ...] = ()  # the builds kept (pin.py), as name==version
    pins_file: Optional[str] = None
    lock: Optional[str] = None  # the pylock.toml written (lock.py)
    lock_error: Optional[str] = None
    remarks: Tuple[str, ...] = ()

    def to_dict(self) -> JsonObject:
        doc: JsonObject = {
            "path": str(self.path) if self.path else None, "python": self.python,
            "installed": list(self.installed), "activate_scripts": list(self.activate_scripts),
            "log": str(self.log) if self.log else None, "import_ok": self.import_ok,
            "verify": self.verify.to_json() if self.verify is not None else None, "verify_error": self.verify_error,
            "seconds": round(self.seconds, 1), "device_note": self.device_note,
            "pins": list(self.pins), "pins_file": self.pins_file, "lock": self.lock,
            "lock_error": self.lock_error, "remarks": list(self.remarks)}
        return mask_doc(doc)


def default_log_path(recipe: str, command: str = "install") -> Path:
    """<cache>/mlprobe/logs/<command>-<recipe>-<time>.log (see guard.cache_base: never a home folder
    that does not exist)."""
    from .guard import cache_base

    base = cache_base() / "mlprobe" / "logs"
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in recipe)
    return base / f"{command}-{safe}-{time.strftime('%Y%m%d-%H%M%S')}.log"


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
    seed_pip: Optional[Path] = None  # pip's wheel, put into a venv made without it with the install itself
    try:
        with _SignalsAsInterrupt(), txn:
            if env.mode == "new-venv":
                assert env.path is not None
                progress.step(f"creating {env.path}")
                txn.claim_new_venv()
                assert txn.new_venv is not None  # the real folder: `python -m venv` does not follow a link
                by_uv = pre.backend.name == "uv" and pre.backend.uv is not None
                # pip's wheel goes in with the install of the resolution, where it can: `python -m venv`
                # without ensurepip takes a tenth of the time
                pip_rides = opts.with_pip and not by_uv and _pip_rides_along(pre, bundled_pip_wheel(info.stdlib))
                if pip_rides:
                    seed_pip = bundled_pip_wheel(info.stdlib)
                argv = uv_venv_argv(pre.backend.uv, env.python, txn.new_venv) if pre.backend.uv and by_uv \
                    else create_venv_argv(env.python, txn.new_venv, opts.with_pip and not pip_rides)
                r = _run_step(argv, transcript, progress, VENV_TIMEOUT_S,
                              env=pre.backend.env(plan.sources) if by_uv else None)
                if by_uv and opts.with_pip:
                    seed_pip = bundled_pip_wheel(info.stdlib)
                    if not _seeds_with_the_install(pre, seed_pip) and r.rc == 0 and pre.backend.uv:
                        seed = uv_seed_pip_argv(pre.backend.uv, str(venv_python(txn.new_venv)), seed_pip,
                                                source_args(plan.sources))
                        r = _run_step(seed, transcript, progress, VENV_TIMEOUT_S, env=pre.backend.env(plan.sources))
                        seed_pip = None
                if r.rc != 0:
                    no_venv_module = "ensurepip" in r.output or "No module named venv" in r.output
                    raise StageError(f"could not create the venv {env.path}", why=r.output.strip()[-300:],
                                     next_step=("on Debian/Ubuntu: `apt install python3-venv`; or pass --venv PATH"
                                                if no_venv_module else "pass another --venv PATH"),
                                     ref="E547", kind="failure")
                txn.venv_made()
                python = str(venv_python(env.path))
                info = inspect_interpreter(python)
                progress.done(f"created {env.path} (Python {info.version})")
            backend = choose_backend(opts.installer, plan.sources, python, info.has_pip,
                                     needs_pip(plan.sources, plan.variant_label))
            if env.path is not None and env.mode != "system":
                from . import settings

                # a .pth or hook of the person's, a kernel spec of theirs, a read-only site-packages:
                # refused before the first package is installed, not after
                settings.check(env.path, Path(info.purelib), plan.env, plan.prepend, plan.recipe,
                               kernel=opts.kernel, user_kernel=opts.user_kernel, force=opts.force)
            txn.begin()
            if env.path is not None:
                keep.lift_pins(env.path, txn, transcript)
            if pre.resolution is not None and pre.resolution.ok:
                txn.protect_dists(installed_names(pre.resolution.dists))
            riders = []  # pip's wheel rides with the install into a venv made without it: its RECORD is ours
            if seed_pip is not None:
                from packaging.utils import parse_wheel_filename

                riders.append(("pip", str(parse_wheel_filename(seed_pip.name)[1])))
            txn.will_install(_dists_to_install(pre) + riders)
            if backend.name == "uv" and env.mode != "system" and env.path is not None:
                txn.protect_file(env.path / ".lock")  # uv's lock of the environment, made at its first run
            resolved = pre.resolution if pre.resolution is not None and pre.resolution.ok else None
            if resolved is not None and not resolved.dists:
                progress.done("nothing to install: the resolution found everything in place")
            else:
                _install(pre, backend, resolved, python, env.mode, transcript, progress, opts, on_child, seed_pip)
            # asked while the import check runs (each an interpreter start): nothing installs after this
            queries = keep.Queries(python, backend.pip or keep.running_pip())
            if env.path is not None:
                queries.start()
            for shim in plan.shims:
                progress.step(f"installing the shim {shim}")
                _install_shim(shim, info, txn, transcript)
                progress.done(f"shim {shim} installed")
            added: List[str] = []
            for f in plan.config_files:
                written_file = _write_config(f, env, txn, transcript)
                if written_file:
                    added.append(written_file)
            plan.added = added
            if env.mode != "system":
                scripts_written = _write_settings(plan, env, info, python, txn, transcript, progress, opts)
            check_env = _env_of_a_plain_start(plan, env, info)
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
                                                     txn, transcript, queries)
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
    lock_path, lock_error = _write_lock(plan, env, python, backend, dists, log_path, transcript, progress,
                                        queries)
    verified: Optional[VerifyResult] = None
    verify_error: Optional[str] = None
    if opts.verify:
        assert info is not None
        verified, verify_error = _verify(plan, python, transcript, progress,
                                           _env_of_a_plain_start(plan, env, info))
    transcript.close()
    return ApplyResult(path=env.path if env.mode != "system" else None, python=python,
                       installed=tuple(f"{d.name}=={d.version}" for d in dists),
                       activate_scripts=tuple(scripts_written), log=log_path, import_ok=import_ok,
                       verify=verified, verify_error=verify_error,
                       seconds=time.perf_counter() - started,
                       pins=tuple(p.requirement for p in pinset.pins) if pinset else (),
                       pins_file=str(pinset.file) if pinset else None, lock=lock_path, lock_error=lock_error,
                       remarks=tuple(remarks), device_note=device_note)


def _dists_to_install(pre: Preflight) -> List[Tuple[str, str]]:
    """What the installer will install: the resolution's distributions with their versions, else the
    packages asked for by name (any version)."""
    if pre.resolution is not None and pre.resolution.ok and pre.resolution.dists:
        return [(d.name, d.version) for d in pre.resolution.dists]
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for p in pre.packages:
        try:
            out.append((Requirement(p).name, ""))
        except InvalidRequirement:
            continue
    return out


def _install(pre: Preflight, backend: Backend, resolved: Optional[Resolution], python: str, mode: str,
             transcript: Transcript, progress: Progress, opts: InstallOptions,
             on_child: Optional[Callable[[Any], None]], seed_pip: Optional[Path] = None) -> None:
    """Install exactly the resolution the pre-flight showed (resolved once: uv's pylock.toml, or pip's
    report as hashed requirements with --no-deps); the packages themselves only when there is none.
    seed_pip: the wheel of pip a venv just made without it gets in the same run (no resolution either)."""
    import tempfile

    plan = pre.plan
    with tempfile.TemporaryDirectory(prefix="mlprobe-resolution-") as tmp:
        if resolved is not None and backend.name == "uv" and resolved.lock_text:
            lock_file = Path(tmp) / LOCK_NAME  # uv reads a lock only by this name (or pylock.NAME.toml)
            text = resolved.lock_text + (_pip_package(seed_pip) if seed_pip is not None else "")
            lock_file.write_text(text, encoding="utf-8")
            argv = backend.install_resolved_argv(str(lock_file), plan.sources, hashes=True)
            what = f"the {len(resolved.dists)} file(s) uv resolved (pylock.toml, sha256 checked)"
        elif resolved is not None and backend.name == "pip" and resolved.dists:
            _hash_local_files(resolved)
            req = Path(tmp) / "resolution.txt"
            lines = resolved.hashed_requirements()
            if seed_pip is not None:  # a direct reference: hashed only when the others are (pip's rule)
                lines.append(f"pip @ {seed_pip.absolute().as_uri()}"
                             + (f" --hash=sha256:{sha256_of(seed_pip)}" if resolved.hashed else ""))
            req.write_text("\n".join(lines) + "\n", encoding="utf-8")
            argv = backend.install_resolved_argv(str(req), plan.sources, hashes=resolved.hashed)
            what = f"the {len(resolved.dists)} file(s) pip resolved (--no-deps" + \
                (", each by its sha256)" if resolved.hashed else ")")
        else:
            argv = backend.install_argv(pre.packages, plan.sources, plan.pip_args)
            what = " ".join(pre.packages)
        progress.step(f"installing with {backend.name}: {what}" if what else
                      f"installing the files of the lock with {backend.name}" if plan.lock_file else
                      f"installing with {backend.name}")
        if mode != "system" and python not in argv[:6]:  # never the wrong interpreter
            raise StageError("internal error: the install command does not name the venv's python",
                             why=" ".join(argv[:6]), ref="E000", kind="failure")
        r = _run_step(argv, transcript, progress, opts.timeout_s, env=backend.env(plan.sources), on_start=on_child)
    if r.rc != 0:
        failure = _diagnose(classify_failure(r.output, backend.name, "installing"), pre)
        raise failure.to_error("failure")
    progress.done(f"installed with {backend.name} in {r.seconds:.1f} s")


def _seeds_with_the_install(pre: Preflight, wheel: Optional[Path]) -> bool:
    """pip's wheel can ride in uv's install of the resolution: there is one, uv installs from a lock,
    and the resolution has no pip of its own."""
    res = pre.resolution
    return wheel is not None and res is not None and res.ok and bool(res.lock_text) and bool(res.dists) \
        and all(canonicalize_name(d.name) != "pip" for d in res.dists)


def _pip_rides_along(pre: Preflight, wheel: Optional[Path]) -> bool:
    """pip's wheel can ride in pip's install of the resolution into a venv made without ensurepip:
    the pip running mlprobe can drive that venv from outside (--python) until it has its own."""
    from .backends import PIP_MIN_FOR_PYTHON_OPTION, _pip_version_tuple

    res = pre.resolution
    return wheel is not None and res is not None and res.ok and res.tool == "pip" and bool(res.dists) \
        and all(canonicalize_name(d.name) != "pip" for d in res.dists) \
        and _pip_version_tuple() >= PIP_MIN_FOR_PYTHON_OPTION


def _pip_package(wheel: Path) -> str:
    """A [[packages]] entry of pylock.toml for the pip wheel the interpreter carries (its own sha256)."""
    import json

    from packaging.utils import parse_wheel_filename

    version = parse_wheel_filename(wheel.name)[1]
    return (f'\n[[packages]]\nname = "pip"\nversion = "{version}"\n'
            f'wheels = [{{ url = {json.dumps(wheel.absolute().as_uri())}, '
            f'hashes = {{ sha256 = "{sha256_of(wheel)}" }} }}]\n')


def _hash_local_files(resolved: Resolution) -> None:
    """pip reports no hash for a wheel of a --find-links folder: read it from the file (an index's
    hash is never computed again)."""
    from .lock import local_path

    for d in resolved.dists:
        path = local_path(d.url) if d.url and not d.sha256 else None
        if path is not None and path.is_file():
            d.sha256 = sha256_of(path)


def _write_settings(plan: InstallPlan, env: TargetEnv, info: Interpreter, python: str, txn: Transaction,
                    transcript: Transcript, progress: Progress, opts: InstallOptions) -> List[str]:
    """The recipe's variables (and a device-check fix's) where every start of the venv's Python gets
    them: the start-up hook, the activate scripts, the kernel spec, the launcher (settings.py); each
    file saved first. Returns the activate scripts written."""
    from . import settings

    assert env.path is not None
    label = " ".join(x for x in (plan.framework or plan.recipe, plan.variant_label or plan.backend) if x)
    try:
        out = settings.write_settings(env.path, python, Path(info.purelib), plan.env, plan.prepend, plan.shims,
                                      plan.recipe, label, kernel=opts.kernel, user_kernel=opts.user_kernel,
                                      manifest=plan.added, txn=txn, force=opts.force)
    except OSError as exc:
        raise StageError("could not write the environment's settings", why=str(exc),
                         next_step="check that the venv is writable by this user", ref="E561",
                         kind="failure") from None
    transcript.note("settings written: " + ", ".join(out.activate + out.hook + out.kernels
                                                     + ([out.launcher] if out.launcher else [])))
    for note in out.notes:
        transcript.note(note)
        if note not in plan.notes:
            plan.notes.append(note)
    if plan.env:
        progress.done(f"{', '.join(plan.env)} set at every start of {env.path}'s Python (start-up hook), "
                      f"in {len(out.activate)} activate script(s)"
                      + (f" and {len(out.kernels)} kernel spec(s)" if out.kernels else ""))
    plan.kernels = list(out.kernels)
    plan.launcher = out.launcher
    return out.activate


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
        plan.added.extend(fix_paths(fix, Path(venv)))
        written = _write_settings(plan, env, info, python, txn, transcript, progress, opts)
        check_env.clear()
        check_env.update(_env_of_a_plain_start(plan, env, info))
        extra = {k: v for k, v in check_env.items() if os.environ.get(k) != v}
        again = list_devices(python, fw, extra)
        transcript.note(f"device check after the fix: {fw} lists {', '.join(again.ids) or 'nothing'}")
        same_vendor = _same_vendor_device(request, again.ids) if fw == "plaidml" else None
        if not again.sees(request) and same_vendor is not None:
            # the plan derived the id from the GPU's name (no loader listed it yet); PlaidML's own id
            # for the device the fix made visible is what PLAIDML_DEVICE_IDS must name
            transcript.note(f"device check: {request} is not listed, {same_vendor} of the same vendor is: "
                            f"PLAIDML_DEVICE_IDS={same_vendor}")
            plan.env["PLAIDML_DEVICE_IDS"] = same_vendor
            written = _write_settings(plan, env, info, python, txn, transcript, progress, opts)
            plan.device = request = same_vendor
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


def _same_vendor_device(request: str, ids: List[str]) -> Optional[str]:
    """The first PlaidML OpenCL id of the requested one's vendor (`opencl_nvidia_...`) in `ids`."""
    parts = request.lower().split("_")
    if len(parts) < 3 or parts[0] != "opencl":
        return None
    prefix = "_".join(parts[:2]) + "_"
    return next((i for i in ids if i.lower().startswith(prefix)), None)


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

        from ..verify.devicecheck import vendor_icds

        known = [f"{lib}={icd}" for lib, icd in vendor_icds()]
        r = run_quiet([sys.executable, "-S", opencl_child.__file__, "--vendors-dir", str(path)] + known, timeout=60.0,
                      env=dict(os.environ, **env))
        transcript.note(f"vendors folder {path}: {', '.join(p.name for p in sorted(path.glob('*.icd')))}"
                        + (f" ({r.stderr.strip()[-200:]})" if r.returncode != 0 else ""))


def _write_lock(plan: InstallPlan, env: TargetEnv, python: str, backend: Backend, dists: List[ResolvedDist],
                log_path: Path, transcript: Transcript, progress: Progress,
                queries: Optional[keep.Queries] = None) -> Tuple[Optional[str], Optional[str]]:
    """(the lock written, or None and why not): a lock that cannot be made does not undo the install.
    Written from the resolution that was installed; pip is asked only where it has no file URL."""
    dest = env.path / LOCK_NAME if env.path is not None else \
        log_path.with_name(log_path.stem.replace("install-", "pylock.", 1) + ".toml")
    progress.step(f"writing the lock {dest}")
    try:
        if dists and all(d.url for d in dists):
            out = keep.lock_resolved(plan, python, dists, dest, transcript, queries)
        else:
            out = keep.lock_installed(plan, python, [d.name for d in dists], backend.pip or keep.running_pip(),
                                      dest, transcript)
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




def fix_paths(fix: Any, venv: Path) -> List[str]:
    """The files a device-check fix adds inside the venv (for the hook's list of what detach removes)."""
    out = [str(venv / rel) for rel in fix.links]
    folder = fix.env.get("OCL_ICD_VENDORS")
    if folder:
        out.append(str(folder))
    return out


def _env_of_a_plain_start(plan: InstallPlan, env: TargetEnv, info: Interpreter) -> Dict[str, str]:
    """The environment the venv's Python gets when started plainly (an IDE, Jupyter, cron, `uv run`):
    this process's own, the start-up hook adding the recipe's variables, and the loader's variables as
    the launcher sets them. Every check after installing runs with it, so it proves the hook. For
    --system (no hook): after setting the variables by hand, as the steps say."""
    if env.mode == "system" or env.path is None:
        return activate.activated_env(os.environ, None, None, plan.env, plan.prepend)
    out = {k: v for k, v in os.environ.items() if k != "MLPROBE_HOOK"}
    for k, v in plan.prepend.items():
        if k not in plan.env:
            out[k] = v + (os.pathsep + out[k] if out.get(k) else "")
    return out


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


def _install_shim(shim: str, info: Interpreter, txn: Transaction, transcript: Transcript) -> None:
    if shim not in ("plaidml-collections", "plaidml", "plaidml-compat"):
        raise StageError(f"unknown shim {shim!r} in the recipe", next_step="fix the recipe data",
                         ref="E513", kind="usage")
    try:
        from ..shims.plaidml_compat import MODULE_NAME, PTH_NAME, install_shim
    except ImportError as exc:
        raise StageError("this mlprobe has no PlaidML compatibility shim", why=str(exc),
                         next_step="update mlprobe", ref="E529", kind="unavailable") from None
    for name in (MODULE_NAME + ".py", PTH_NAME):
        txn.protect_file(Path(info.purelib) / name)
    out = install_shim(info.purelib)
    transcript.note(f"shim {shim} installed into {info.purelib}: {out} (loaded by the start-up hook)")


def _write_config(f: Dict[str, str], env: TargetEnv, txn: Transaction, transcript: Transcript) -> Optional[str]:
    from .preflight import config_file_target

    path, why_not = config_file_target(f["path"], env.path)
    if path is None:
        transcript.note(f"config file {f['path']} not written: {why_not}; its content is in the plan")
        return None
    txn.protect_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f["content"], encoding="utf-8")
    transcript.note(f"wrote {path}")
    return str(path)


def _verify(plan: InstallPlan, python: str, transcript: Transcript, progress: Progress,
            env: Dict[str, str]) -> Tuple[Optional[VerifyResult], Optional[str]]:
    """(verify's result, None), or (None, why verify gave none)."""
    fw = _verify_framework(plan)
    if not fw:
        return None, f"no verify for framework {plan.framework or '?'}"
    try:
        from ..verify.runner import verify
    except ImportError as exc:
        return None, f"verify is not available in this mlprobe ({exc})"
    progress.step(f"verifying {fw} in {python}")

    def on_event(ev: JsonObject) -> None:
        """A progress event of a verify child (its JSON line, with the framework added)."""
        if ev.get("event") in ("stage", "device_done", "discover"):
            progress.line(" ".join(str(ev.get(k)) for k in ("framework", "device", "stage") if ev.get(k)))

    try:
        extra = {k: v for k, v in env.items() if os.environ.get(k) != v}
        result = verify(python=python, framework=fw, device=plan.device, on_event=on_event, env=extra)
    except StageError as exc:
        transcript.note(f"verify failed: {exc.what}")
        progress.done("verify could not run", ok=False)
        return None, exc.render()
    except KeyboardInterrupt:
        progress.done("verify interrupted", ok=False)
        return None, "verify interrupted (the install itself is complete)"
    for line in result.summary:
        transcript.note(f"verify: {line}")
    progress.done("verify finished", ok=result.exit_code == 0)
    return result, None


__all__ = ["prepare", "apply", "Preflight", "ApplyResult", "Progress", "TargetEnv", "RestoreReport",
           "pip_command", "plan_steps", "choose_target"]
