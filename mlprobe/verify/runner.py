"""`run_verify`: discover the frameworks in a target interpreter, run the payload there (one child
process per framework, per PlaidML device, and again after a crash), and turn the measurements into
verdicts. Nothing here imports torch, tensorflow or plaidml: only the children do."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from .. import __version__
from ..errors import StageError, exit_status
from ..model.contract import to_json
from ..model.jsontypes import JsonObject, JsonValue
from ..model.verify import CpuFigure, DeviceResult, FrameworkRun, SlowGpu, VerifyPython, VerifyRequest, VerifyResult
from ..model.vocabulary import vocabulary
from . import verdict as V
from .child import Event, EventSink
from .children import FrameworkChildren, RunOptions, run_plaidml, run_split, run_torch_or_tf, split_devices, wanted
from .devicecheck import VISIBILITY, Listing, diagnose, matches, probe_loaders
from .discover import FRAMEWORKS, Discovery, Found, _obj, _objects, _s, discover
from .overlap import TimingGate, run_lanes
from .payload._harness import DEFAULTS as PAYLOAD_DEFAULTS

SCHEMA = "mlprobe.verify/1"
FRAMEWORK_CHOICES = ("any",) + vocabulary().verify_choices()
DEFAULT_TIMEOUT = 600.0
DEFAULT_STALL = 180.0
# What the payload measures against (its DEFAULTS, the one source: every child gets them in its
# config), stated in every result.
TOLERANCES: JsonObject = {
    "loss_rtol": PAYLOAD_DEFAULTS["loss_rtol"], "grad_rtol": PAYLOAD_DEFAULTS["grad_rtol"],
    "learn_target": PAYLOAD_DEFAULTS["learn_target"], "accelerated_at": V.ACCELERATED_AT,
    "speed_batch": PAYLOAD_DEFAULTS["speed_batch"]}
PLAIDML_CPU_NOTE = ("PlaidML's {id} is its LLVM CPU device: it runs on the CPU, not on a GPU, and "
                    "accelerates nothing")


def resolve_python(python: Optional[str]) -> str:
    if not python:
        return sys.executable
    found = shutil.which(python) if os.sep not in python else None
    if found is None and os.path.exists(python):  # a path, or a name in this folder (`--python .venv`)
        found = python
    if not found or not os.path.exists(found):
        raise StageError(
            f"no Python interpreter at {python}", why="the frameworks are imported and checked in the interpreter that --python names",
            next_step="pass the `python` of the environment to check, e.g. `--python .venv/bin/python`",
            ref="E601", kind="usage")
    why = None
    if os.path.isdir(found):
        venv_python = os.path.join(found, "Scripts" if os.name == "nt" else "bin",
                                   "python.exe" if os.name == "nt" else "python")
        why = "it is a folder" + (f"; its interpreter is {venv_python}" if os.path.isfile(venv_python) else "")
    elif not os.path.isfile(found):
        why = "it is not a regular file"
    elif os.name == "posix" and not os.access(found, os.X_OK):
        why = "it is not executable"
    if why is None:
        why = _not_python(found)
    if why:
        raise StageError(
            f"{found} is not a Python interpreter", why=why,
            next_step="pass the `python` of the environment to check, e.g. `--python .venv/bin/python`",
            ref="E601", kind="usage")
    return found


_ASK = "import sys; print('mlprobe-python', *sys.version_info[:2])"
ASK_TIMEOUT_S = 30.0
ASK_MAX_BYTES = 64 * 1024  # the answer is one short line; a start-up that prints more is stopped


def _read_capped(proc: Any, timeout: float, cap: int) -> Tuple[str, str, bool, bool]:
    """(stdout, stderr, timed out, over the cap) of a child, read until both pipes close, the time is
    up or together they passed `cap` bytes: a child that floods its output is never read whole.
    (Windows' select takes no pipes: there the child is read whole within the time limit.)"""
    import selectors
    import subprocess

    if os.name == "nt":
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return "", "", True, False
        return (out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), False,
                len(out) + len(err) > cap)
    sel = selectors.DefaultSelector()
    chunks: Dict[Any, List[bytes]] = {}
    for f in (proc.stdout, proc.stderr):
        sel.register(f, selectors.EVENT_READ)
        chunks[f] = []
    deadline, total = time.monotonic() + timeout, 0
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            return "", "", True, False
        for key, _ in sel.select(left):
            data = os.read(key.fd, 65536)
            if not data:
                sel.unregister(key.fileobj)
                continue
            chunks[key.fileobj].append(data)
            total += len(data)
            if total > cap:
                return "", "", False, True
    text = [b"".join(chunks[f]).decode("utf-8", "replace") for f in (proc.stdout, proc.stderr)]
    return text[0], text[1], False, False


def _not_python(path: str) -> Optional[str]:
    """Why `path` does not answer as a Python interpreter (it is started once, with -c), or None."""
    import signal
    import subprocess

    try:
        proc = subprocess.Popen([path, "-c", _ASK], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=os.name == "posix")
    except OSError as exc:
        return f"it cannot be started: {exc.strerror or exc}"
    hung = spewed = False
    try:
        out, err, hung, spewed = _read_capped(proc, ASK_TIMEOUT_S, ASK_MAX_BYTES)
    finally:
        if os.name == "posix":
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        else:
            proc.kill()
        proc.wait()
    words = out.split()
    if len(words) == 3 and words[0] == "mlprobe-python" and words[1].isdigit():
        return None
    if spewed:
        return (f"started as `{os.path.basename(path)} -c ...`, it printed more than {ASK_MAX_BYTES // 1024} KiB "
                "without answering as Python: stopped there")
    if hung:
        return f"started as `{os.path.basename(path)} -c ...`, it did not answer within {ASK_TIMEOUT_S:g} s"
    said = (err.strip() or out.strip()).splitlines()[-1:] or ["nothing"]
    return (f"started as `{os.path.basename(path)} -c ...` (the way mlprobe runs its checks) it did not answer "
            f"as Python: exit status {proc.returncode}, it said {said[0][:200]!r}")


def select_frameworks(framework: str, found: Discovery) -> Tuple[List[str], List[FrameworkRun]]:
    """(frameworks to run, framework records for those asked for but not importable)."""
    have = {f for f in FRAMEWORKS if found.importable(f)}
    missing: List[FrameworkRun] = []
    if framework == "any":
        return [f for f in FRAMEWORKS if f in have], missing
    if framework == "keras":
        # Keras means PlaidML-Keras where it is installed (the Keras 2.2.4 stack), else TensorFlow's Keras.
        for f in ("plaidml", "tensorflow"):
            if f in have:
                return [f], missing
        missing.append(FrameworkRun(name="keras", status="not installed",
                                    reason="neither plaidml-keras nor tensorflow is importable in this interpreter"))
        return [], missing
    if framework in have:
        return [framework], missing
    missing.append(FrameworkRun(name=framework, status="not installed",
                                reason=f"{framework} is not importable in this interpreter"))
    return [], missing


def _rec(value: JsonValue) -> Optional[JsonObject]:
    """A stage record of the payload (JSON, described in payload/_harness.py), or None."""
    return value if isinstance(value, dict) else None


def device_record(run: FrameworkChildren, did: str) -> DeviceResult:
    meta = run.meta.get(did, {"id": did, "kind": "?"})
    data = run.done.get(did) or run.partial.get(did) or {}
    speed = _rec(data.get("speed"))
    spread = speed.get("spread") if speed is not None else None
    capability, gfx, memory, experimental = (meta.get("compute_capability"), meta.get("gfx_target"),
                                             meta.get("total_memory_bytes"), meta.get("experimental"))
    return DeviceResult(
        framework=run.fw, framework_version=run.version, python=run.python,
        device=did, kind=_s(meta.get("kind")), name=_s(meta.get("name")), api=_s(meta.get("api")),
        verdict=None, reason=None,
        correctness=_rec(data.get("correctness")), learning=_rec(data.get("learning")), speed=speed,
        proof=_rec(data.get("proof")), speedup_vs_framework_cpu=None, speedup_vs_best_cpu=None,
        failure=run.failed.get(did),
        compute_capability=None if capability is None else str(capability), gfx_target=_s(gfx),
        total_memory_bytes=memory if isinstance(memory, int) and not isinstance(memory, bool) else None,
        experimental=experimental if isinstance(experimental, bool) else None,
        cpu_note=PLAIDML_CPU_NOTE.format(id=did) if run.fw == "plaidml" and meta.get("kind") == "cpu" else None,
        speed_spread=float(spread) if isinstance(spread, (int, float)) and not isinstance(spread, bool) else None,
    )


def _unavailable_record(fw: str, version: Optional[str], python: str, device: str, reason: str,
                        kind: Optional[str] = None) -> DeviceResult:
    return DeviceResult(framework=fw, framework_version=version, python=python, device=device, kind=kind,
                        name=None, api=None, verdict=V.UNAVAILABLE, reason=reason, correctness=None,
                        learning=None, speed=None, proof=None, speedup_vs_framework_cpu=None,
                        speedup_vs_best_cpu=None, failure=None)


def started_env(python: str, env: Mapping[str, str]) -> Dict[str, str]:
    """`env` as a process of `python` sees it once started: its venv's start-up hook (venvconf/hook.py)
    adds the settings that `env` does not set, unless MLPROBE_HOOK turns it off."""
    from ..venvconf import hook
    from ..venvconf.layout import site_dirs

    out = dict(env)
    venv = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    if hook.hook_off(out) or not os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
        return out
    from pathlib import Path

    for site in site_dirs(Path(venv)):
        state = hook.read(site)
        if state is not None and state.pth:
            for k, v in state.settings.items():
                out.setdefault(k, v)
            break
    return out


def _plaidml_settings_ids(env: Mapping[str, str]) -> Tuple[List[str], Optional[str]]:
    """PLAIDML_DEVICE_IDS as PlaidML itself reads it: the variable (space-separated), else the settings
    file ($PLAIDML_SETTINGS, else ~/.plaidml; a JSON object whose PLAIDML_DEVICE_IDS is a list)."""
    raw = env.get("PLAIDML_DEVICE_IDS")
    if raw is not None:
        return raw.split(), "PLAIDML_DEVICE_IDS"
    import json

    path = env.get("PLAIDML_SETTINGS") or os.path.join(os.path.expanduser("~"), ".plaidml")
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a device would block or never end
            return [], None
        with open(path, "rb") as fh:
            doc = json.loads(fh.read(1 << 20).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return [], None
    ids = doc.get("PLAIDML_DEVICE_IDS") if isinstance(doc, dict) else None
    if isinstance(ids, str):
        ids = ids.split()
    if not isinstance(ids, list):
        return [], None
    return [str(i) for i in ids if isinstance(i, str) and i.strip()], path


def requests_for(framework: str, device: Optional[str], env: Mapping[str, str]) -> List[Tuple[str, str]]:
    """The devices asked for, with what asked: `--device` (or the recipe's device), PlaidML's
    PLAIDML_DEVICE_IDS, a *_VISIBLE_DEVICES list that names GPUs. (request, asked by)."""
    out: List[Tuple[str, str]] = []
    if device and device.lower() != "cpu":
        out.append((device, "--device"))
    if framework == "plaidml":
        ids, by = _plaidml_settings_ids(env)
        out += [(i, by or "PLAIDML_DEVICE_IDS") for i in ids if i != device]
    elif not device:
        for var in VISIBILITY["gpu"]:
            val = env.get(var)
            if val is not None and val.strip() and val.strip().lower() not in ("-1", "none", "nodevfiles", "void"):
                out.append(("gpu", f"{var}={val}"))
                break
    return out


def _not_seen_record(run: "FrameworkChildren", request: str, asked_by: str, env: Mapping[str, str],
                     loaders: Optional[JsonObject]) -> DeviceResult:
    listing = Listing(framework=run.fw, version=run.version, devices=tuple(run.meta[d] for d in run.order),
                      unavailable=tuple(run.unavailable))
    diag = diagnose(run.fw, request, listing, env, loaders_doc=loaders)
    listed = ", ".join(listing.ids) or "no device"
    reason = (f"{run.fw} {run.version or ''} does not list {request} (asked for by {asked_by}); it lists "
              f"{listed}. Likely cause: {diag.cause}").replace("  ", " ")
    return replace(_unavailable_record(run.fw, run.version, run.python, request, reason, kind=None),
                   verdict=V.NOT_SEEN, requested_by=asked_by, listed_devices=tuple(listing.ids),
                   likely_cause=diag.cause, diagnosis=diag.to_json())


def _ips(rec: DeviceResult) -> Optional[float]:
    sp = rec.speed
    if sp is None or sp.get("error") or sp.get("nan") or rec.failure:
        return None
    v = sp.get("images_per_s")
    return float(v) if isinstance(v, (int, float)) and v else None


def run_verify(
    python: Optional[str] = None,
    framework: str = "any",
    device: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
    quick: bool = False,
    stall: Optional[float] = None,
    baseline_pythons: Optional[Sequence[str]] = None,
    cpu_peers: bool = True,
    inject: Optional[JsonObject] = None,
    on_event: Optional[EventSink] = None,
    overrides: Optional[JsonObject] = None,
    env: Optional[Mapping[str, str]] = None,
) -> JsonObject:
    """`verify` as the result document (`mlprobe verify --json`): the JSON edge of the commands."""
    doc: JsonObject = verify(python, framework, device, timeout, quick, stall, baseline_pythons, cpu_peers, inject,
                             on_event, overrides, env).to_json()
    return doc


def verify(
    python: Optional[str] = None,
    framework: str = "any",
    device: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
    quick: bool = False,
    stall: Optional[float] = None,
    baseline_pythons: Optional[Sequence[str]] = None,
    cpu_peers: bool = True,
    inject: Optional[JsonObject] = None,
    on_event: Optional[EventSink] = None,
    overrides: Optional[JsonObject] = None,
    env: Optional[Mapping[str, str]] = None,
) -> VerifyResult:
    """Verify the frameworks of `python` (default: this interpreter) on every usable device, or on
    `device`. `timeout` bounds each child process; `stall` (default min(timeout, 180 s)) is how long a
    child may go without reporting progress before it counts as hung. `baseline_pythons` are other
    interpreters whose frameworks' CPU speed joins the best-CPU figure (speed only). `inject` is for
    tests (fault injection in the payload); `overrides` replaces payload settings (the payload's DEFAULTS:
    repeats, budgets, tolerances) and is recorded in the result. Returns the typed result
    (model/verify.py; mlprobe/verify/schema.py describes its JSON). `env` is set in every child on top of this process's
    environment: the variables the environment's activate script sets (KERAS_BACKEND, HSA_OVERRIDE_…)."""
    if framework not in FRAMEWORK_CHOICES:
        raise StageError(f"unknown framework {framework!r}", next_step="choose one of " + ", ".join(FRAMEWORK_CHOICES),
                         ref="E603", kind="usage")
    t0 = time.monotonic()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    target = resolve_python(python)
    events_lock = threading.Lock()  # the children report from several threads

    def note(ev: Event) -> None:
        if on_event is not None:
            with events_lock:
                on_event(ev)

    sink: Optional[EventSink] = note if on_event is not None else None
    # The frameworks' children (and the CPU peers') run side by side, their timed loops one at a
    # time (verify/overlap.py); MLPROBE_VERIFY_SERIAL=1 runs one child after the other.
    parallel = os.environ.get("MLPROBE_VERIFY_SERIAL") != "1"
    gate = TimingGate() if parallel else None
    opts = RunOptions(quick=quick, timeout=float(timeout), stall=float(stall or min(timeout, DEFAULT_STALL)),
                      inject=dict(inject) if inject else None, overrides=dict(overrides or {}),
                      env=dict(env or {}), gate=gate)

    note({"event": "discover", "python": target})
    disc = discover(target, timeout=min(timeout, 60.0), env=env)
    chosen, fw_records = select_frameworks(framework, disc)
    lanes, peer_slots = _lanes(target, chosen, disc, device, opts, sink, cpu_peers, baseline_pythons, timeout, gate)
    started_runs = run_lanes(lanes, parallel)
    results: List[DeviceResult] = []
    no_match: List[DeviceResult] = []  # requested devices a framework does not list (NOT_SEEN)
    extra_env: Dict[str, str] = dict(env or {})
    full_env: Dict[str, str] = started_env(target, dict(os.environ, **extra_env))
    hook_added = {k: v for k, v in full_env.items() if k not in os.environ and k not in extra_env}
    loaders: Optional[JsonObject] = None
    fw_cpu: Dict[str, CpuFigure] = {}
    for fw in chosen:
        run, todo = _main(started_runs[fw][0].result())
        found = disc.frameworks.get(fw, Found())
        frec = FrameworkRun(name=fw, version=run.version or found.version, status="verified",
                            import_s=run.import_s, info=run.info,
                            unavailable_devices=tuple(u for u in run.unavailable if not u.get("quiet")),
                            notes=tuple(str(u.get("reason")) for u in run.unavailable if u.get("quiet")),
                            shim_installed=found.shim if fw == "plaidml" else None)
        if run.fatal is not None and not run.done:
            reason = str(run.fatal.get("message"))
            if fw == "plaidml" and "collections" in reason and not frec.shim_installed:
                reason += (" - Keras 2.2.4 needs the PlaidML compatibility shim on Python >= 3.10: "
                           "`mlprobe install --recipe plaidml-keras --settings-only --venv VENV` writes it "
                           "into that venv, where its start-up hook loads it at every start")
            frec = replace(frec, status="unavailable", reason=reason,
                           stderr_tail=_s(run.fatal.get("stderr_tail")) or None)
            results.append(_unavailable_record(fw, frec.version, target, device or "any", reason))
            fw_records.append(frec)
            continue
        for did in todo:
            rec = device_record(run, did)
            results.append(rec)
            ips = _ips(rec)
            if rec.kind == "cpu" and ips and fw not in fw_cpu:
                fw_cpu[fw] = CpuFigure(framework=fw, version=run.version, python=target, images_per_s=ips,
                                       device=did, spread=rec.speed_spread)
        # A device asked for and not listed is a result of its own (NOT_SEEN), never a silent
        # substitute; with --framework any, a *_VISIBLE_DEVICES request counts only if no framework
        # lists a GPU (checked below).
        for req, by in requests_for(fw, device, full_env):
            if any(matches(run.meta[d], req) for d in run.order):
                continue
            if fw == "plaidml" and loaders is None:
                loaders = probe_loaders(target, extra_env)
            rec = _not_seen_record(run, req, by, full_env, loaders if fw == "plaidml" else None)
            (no_match if by != "--device" or framework == "any" else results).append(rec)
        fw_records.append(frec)

    # With --framework any, a framework without the requested device is noise once another has it.
    seen_gpu = any(r.verdict is None and r.kind != "cpu" for r in results)
    for rec in no_match:
        by = str(rec.requested_by)
        if framework != "any" or not seen_gpu or (by != "--device" and "_VISIBLE_DEVICES" not in by):
            results.append(rec)

    # Peers: the CPU speed of frameworks installed but not verified here (and of other interpreters),
    # because the fastest CPU path is what a user would otherwise use.
    peers: List[CpuFigure] = []
    for lane, index in peer_slots:  # in the order they were asked for: this interpreter's, then the others'
        for run in _peers(started_runs[lane][index].result()):
            for did in run.done:
                rec = device_record(run, did)
                ips = _ips(rec)
                if ips:
                    peers.append(CpuFigure(framework=run.fw, version=run.version, python=run.python,
                                           images_per_s=ips, speed=rec.speed, spread=rec.speed_spread))

    cpu_figures = list(fw_cpu.values()) + peers
    best_cpu = max(cpu_figures, key=lambda r: r.images_per_s) if cpu_figures else None
    if best_cpu is not None:
        best_cpu = replace(best_cpu, seconds_per_epoch=60000.0 / best_cpu.images_per_s, speed=None)
    best_json: Optional[JsonObject] = to_json(best_cpu) if best_cpu is not None else None
    for i, rec in enumerate(results):
        if rec.verdict is None:
            own = fw_cpu.get(rec.framework)
            verdict, why = V.decide(to_json(rec), to_json(own) if own is not None else None, best_json)
            rec = replace(rec, verdict=verdict, reason=why)
        ips = _ips(rec)
        base = fw_cpu[rec.framework].images_per_s if rec.framework in fw_cpu else None
        if ips and base:
            rec = replace(rec, speedup_vs_framework_cpu=round(ips / base, 3))
        if ips and best_cpu is not None:
            rec = replace(rec, speedup_vs_best_cpu=round(ips / best_cpu.images_per_s, 3))
        results[i] = rec

    from .peers import slow_gpus

    given: JsonObject = dict(overrides or {})
    tolerances: JsonObject = dict(TOLERANCES, **{k: v for k, v in given.items() if k in TOLERANCES})
    result = VerifyResult(
        schema=SCHEMA, mlprobe_version=__version__, started=started,
        python=VerifyPython(executable=target, version=disc.python, prefix=disc.prefix, platform=disc.platform,
                            machine=disc.machine, cpu_count=disc.cpu_count),
        request=VerifyRequest(framework=framework, device=device, quick=quick,
                              # what the child gets besides this process's environment: the
                              # variables asked for here and those the venv's start-up hook sets
                              env={k: str(v) for k, v in sorted(dict(hook_added, **(env or {})).items())
                                   if k not in ("PATH", "VIRTUAL_ENV")} or None),
        overrides=given or None,
        frameworks=tuple(fw_records), results=tuple(results), cpu_peers=tuple(peers), best_cpu=best_cpu,
        tolerances=tolerances,
        # Several GPUs of one model: the one clearly slower than the others is named.
        slow_gpus=tuple(SlowGpu(framework=g.framework, device=g.device, name=g.name, images_per_s=g.images_per_s,
                                peer_median=g.peer_median, peers=tuple(g.peers), slower_by=round(g.slower_by, 3),
                                message=g.sentence()) for g in slow_gpus(results)),
        summary=(), exit_code=0, wall_s=0.0)
    doc = result.to_json()
    result = replace(result, summary=tuple(summarise(doc)), exit_code=exit_code(doc),
                     wall_s=round(time.monotonic() - t0, 2))
    note({"event": "finished", "wall_s": result.wall_s})
    return result


MainRun = Tuple["FrameworkChildren", List[str]]  # a framework's own verification: the run, the devices it ran
PeerRuns = List["FrameworkChildren"]  # a CPU peer job: the runs it made (none where it asked nobody)
Job = Callable[[], Union[MainRun, PeerRuns]]


def _main(result: Union[MainRun, PeerRuns]) -> MainRun:
    assert isinstance(result, tuple), result  # lane jobs at index 0 are the main jobs (_lanes)
    return result


def _peers(result: Union[MainRun, PeerRuns]) -> PeerRuns:
    assert isinstance(result, list), result
    return result


def _lanes(target: str, chosen: List[str], disc: Discovery, device: Optional[str], opts: RunOptions,
           sink: Optional[EventSink], cpu_peers: bool, baseline_pythons: Optional[Sequence[str]],
           timeout: float, gate: Optional[TimingGate]) -> Tuple[Dict[str, List[Job]], List[Tuple[str, int]]]:
    """The children of this run, by framework: each framework's lane runs its own verification first,
    then its CPU peers (the same framework in other interpreters, speed only), one after the other;
    the lanes run side by side. A peer job returns the runs it made (none for an interpreter that is
    the target's own environment or cannot be asked). Also: where each peer job is, (lane, index), in
    the order the peers are reported."""
    lanes: Dict[str, List[Job]] = {}
    slots: List[Tuple[str, int]] = []

    def add(lane: str, job: Job) -> Tuple[str, int]:
        lanes.setdefault(lane, []).append(job)
        return lane, len(lanes[lane]) - 1

    for fw in chosen:
        def main_job(fw: str = fw) -> Tuple[FrameworkChildren, List[str]]:
            run = FrameworkChildren(target, fw, opts, sink)
            if fw == "plaidml":
                return run, run_plaidml(run, device)
            if split_devices(fw, disc.frameworks.get(fw, Found()), device, gate):
                return run, run_split(run)
            return run, run_torch_or_tf(run, device)
        add(fw, main_job)
    if not cpu_peers:
        return lanes, slots

    def peer_runs(python: str, f: str) -> List[FrameworkChildren]:
        run = FrameworkChildren(python, f, replace(opts, inject=None), sink)
        run_torch_or_tf(run, "cpu", speed_only=True, cpu_only=True)
        return [run]

    # Peers: the CPU speed of frameworks installed but not verified here (and of other interpreters),
    # because the fastest CPU path is what a user would otherwise use.
    for f in FRAMEWORKS:
        if f not in chosen and f != "plaidml" and disc.importable(f):
            def own_peer(f: str = f) -> PeerRuns:
                return peer_runs(target, f)
            slots.append(add(f, own_peer))
    others: Dict[str, Optional[Discovery]] = {}
    others_lock = threading.Lock()

    def other_disc(op: str) -> Optional[Discovery]:
        with others_lock:  # each interpreter asked once, whichever lane asks first
            if op not in others:
                try:
                    odisc: Optional[Discovery] = discover(op, timeout=min(timeout, 60.0), gate=gate)
                except StageError:
                    odisc = None
                if odisc is not None and odisc.prefix and odisc.prefix == disc.prefix:
                    odisc = None  # the same environment (a venv's python is a link to its base: compare prefixes)
                others[op] = odisc
            return others[op]

    seen: Set[str] = set()
    for other in baseline_pythons or ():
        try:
            op = resolve_python(other)
        except StageError:
            continue
        if op in seen:
            continue
        seen.add(op)
        for f in FRAMEWORKS:
            if f == "plaidml":
                continue

            def peer_job(op: str = op, f: str = f) -> List[FrameworkChildren]:
                odisc = other_disc(op)
                if odisc is None or not odisc.importable(f):
                    return []
                return peer_runs(op, f)
            slots.append(add(f, peer_job))
    return lanes, slots


def _records(doc: Mapping[str, JsonValue], key: str) -> List[JsonObject]:
    return _objects(doc.get(key))


def summarise(doc: Mapping[str, JsonValue]) -> List[str]:
    """The result's summary in words, read from its document (what `verify --json` prints)."""
    out = [str(r["reason"]) for r in _records(doc, "results") if r.get("reason")]
    for f in _records(doc, "frameworks"):
        if f.get("status") == "not installed":
            out.append(f"{f.get('name')}: {f.get('reason')}")
    out.extend(str(g.get("message")) for g in _records(doc, "slow_gpus"))
    busy = [(r, _obj(_obj(r.get("speed")).get("machine_load"))) for r in _records(doc, "results")]
    busy = [(r, m) for r, m in busy if m.get("busy")]
    if busy:
        names = ", ".join(f"{r.get('framework')} {r.get('device')}" for r, _m in busy)
        out.append(f"The machine was busy while {names} timed ({busy[0][1].get('why')}): the speeds can "
                   "differ from run to run; verify again on a quiet machine for a figure to compare")
    best = _obj(doc.get("best_cpu"))
    ips, epoch = best.get("images_per_s"), best.get("seconds_per_epoch")
    if isinstance(ips, (int, float)) and isinstance(epoch, (int, float)):
        out.append(f"Best CPU figure: {best.get('framework')} {best.get('version') or ''} at "
                   f"{V.fmt_ips(ips)} images/s ({epoch:.0f} s per 60,000-image epoch)".replace("  ", " "))
    if not _records(doc, "results") and not any(f.get("status") == "not installed" for f in _records(doc, "frameworks")):
        out.append("No framework (torch, tensorflow, plaidml-keras) is installed in "
                   f"{_obj(doc.get('python')).get('executable')}: nothing to verify")
    return out


def exit_code(doc: Mapping[str, JsonValue]) -> int:
    """The exit status a result implies, read from its document."""
    results = _records(doc, "results")
    verdicts = [r.get("verdict") for r in results]
    if V.WRONG_RESULTS in verdicts or V.NOT_SEEN in verdicts:
        return exit_status("failure")
    if not any(v in V.WORKING for v in verdicts):
        return exit_status("unavailable")
    dev = _s(_obj(doc.get("request")).get("device"))
    if dev and not any(r.get("verdict") in V.WORKING and wanted(dict(r, id=r.get("device")), dev) for r in results):
        return exit_status("unavailable")
    return exit_status("ok")
