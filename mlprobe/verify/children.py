"""One framework's verification in the target interpreter: the child processes that run the payload
(one for all devices; two at once where the CPU and the accelerators split, split_devices; one per
PlaidML device; again after a crash) and what their events say, collected per device
(FrameworkChildren). The runner (runner.py) turns what they collect into results and verdicts."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar

from ..model.jsontypes import JsonObject, JsonValue
from . import verdict as V
from .child import ChildResult, Event, EventSink, child_env, run_child
from .devicecheck import Device, matches
from .discover import Found, _obj, _objects, _s
from .overlap import TimingGate
from .payload._harness import DEFAULTS as PAYLOAD_DEFAULTS

T = TypeVar("T")


def wanted(dev: Device, request: Optional[str]) -> bool:
    """As the payload's `wanted` reads a request: does a device match `--device` (id, kind, id prefix, api, 'gpu')?"""
    return matches(dev, request)


def failure(child: ChildResult, framework: str, device: str, stage: Optional[str]) -> JsonObject:
    where = f" during the {V.STAGE_WORDS.get(stage or '', stage)}" if stage else ""
    msg = f"the {framework} process {child.how()}{where} on {device}"
    line = child.last_error_line()
    if line and child.ended in ("crash", "exit"):
        msg += f" (last message: {line})"
    return {"ended": child.ended, "detail": child.detail, "stage": stage, "message": msg,
            "stderr_tail": child.stderr_tail[-1500:]}


@dataclass(frozen=True)
class RunOptions:
    """What every child of one verify run is given: limits, the payload's overrides, the variables of
    the environment, fault injection (tests) and the timing gate of the overlapped schedule."""

    quick: bool
    timeout: float
    stall: float
    inject: Optional[JsonObject] = None
    overrides: JsonObject = field(default_factory=dict)
    env: Dict[str, str] = field(default_factory=dict)
    gate: Optional[TimingGate] = None


class FrameworkChildren:
    """Collects one framework's device results across one or more child processes."""

    def __init__(self, python: str, framework: str, opts: RunOptions, on_event: Optional[EventSink]):
        self.python, self.fw, self.opts, self.on_event = python, framework, opts, on_event
        self.version: Optional[str] = None
        self.info: JsonObject = {}
        self.import_s: Optional[float] = None
        # the payload's records, as its events carry them (JSON): devices, stage results, failures
        self.meta: Dict[str, JsonObject] = {}
        self.order: List[str] = []
        self.partial: Dict[str, JsonObject] = {}
        self.done: Dict[str, JsonObject] = {}
        self.failed: Dict[str, JsonObject] = {}
        self.unavailable: List[JsonObject] = []
        self.fatal: Optional[JsonObject] = None

    def _sink(self, ev: Event) -> None:
        if self.on_event is not None:
            self.on_event(dict(ev, framework=self.fw, python=self.python))

    def child(self, cfg: JsonObject, env_extra: Optional[Dict[str, str]] = None) -> ChildResult:
        import json

        full: JsonObject = dict(PAYLOAD_DEFAULTS)
        full.update(self.opts.overrides)
        full.update({"framework": self.fw, "quick": self.opts.quick})
        if self.opts.inject:
            full["inject"] = self.opts.inject
        gate = self.opts.gate
        if gate is not None:
            full["gated"] = True  # timed loops wait for the gate (verify/overlap.py)
            full["parent_pid"] = os.getpid()  # a paused child must not outlive this process
        full.update(cfg)
        overlap = {"gate": gate} if gate is not None else {}
        res = run_child(self.python, ["run", json.dumps(full)],
                        env=child_env(dict(self.opts.env, **(env_extra or {}))),
                        timeout=self.opts.timeout, stall=self.opts.stall, on_event=self._sink, **overlap)
        current: Optional[Tuple[str, str]] = None
        hello = False
        # The child's events are JSON (verify/child.py): each value is read for the shape the payload sends.
        for ev in res.events:
            kind = ev.get("event")
            dev, stage = _s(ev.get("device")), _s(ev.get("stage"))
            if kind == "hello":
                hello = True
                self.version = _s(ev.get("version")) or self.version
                self.info = _obj(ev.get("info")) or self.info  # the last child's (the one that ran devices)
                import_s = ev.get("import_s")
                if self.import_s is None and isinstance(import_s, (int, float)):
                    self.import_s = float(import_s)
            elif kind == "devices":
                for d in _objects(ev.get("devices")):
                    did = _s(d.get("id"))
                    if did is not None and did not in self.meta:
                        self.meta[did] = d
                        self.order.append(did)
                for u in _objects(ev.get("unavailable")):
                    if u not in self.unavailable:
                        self.unavailable.append(u)
            elif kind == "stage" and dev is not None and stage is not None:
                current = (dev, stage)
            elif kind == "result" and dev is not None and stage is not None:
                self.partial.setdefault(dev, {})[stage] = ev.get("data")
            elif kind == "device_done" and dev is not None:
                self.done[dev] = _obj(ev.get("data"))
                current = None
            elif kind == "fatal":
                self.fatal = {"stage": ev.get("stage"), "message": ev.get("error"),
                              "traceback": ev.get("traceback")}
        if not res.clean and self.fatal is None:
            if current and current[0] not in self.done:
                self.failed[current[0]] = failure(res, self.fw, current[0], current[1])
            elif not hello:
                self.fatal = {"stage": "import",
                              "message": f"the {self.fw} process {res.how()} while importing {self.fw}"
                                         + (f" (last message: {res.last_error_line()})"
                                            if res.last_error_line() else ""),
                              "ended": res.ended, "stderr_tail": res.stderr_tail[-1500:]}
            else:
                self.fatal = {"stage": "run", "message": f"the {self.fw} process {res.how()}",
                              "ended": res.ended, "stderr_tail": res.stderr_tail[-1500:]}
        return res

    def remaining(self, todo: Sequence[str]) -> List[str]:
        return [d for d in todo if d not in self.done and d not in self.failed]

    def spawn(self) -> "FrameworkChildren":
        """An empty collector for another child of the same framework, interpreter and options."""
        return FrameworkChildren(self.python, self.fw, self.opts, self.on_event)

    def merge(self, other: "FrameworkChildren", devices: Sequence[str]) -> None:
        """Take `other`'s listing (devices, unavailable ones, version) and its results for `devices`."""
        for did in other.order:
            if did not in self.meta:
                self.meta[did] = other.meta[did]
                self.order.append(did)
        self.unavailable += [u for u in other.unavailable if u not in self.unavailable]
        for mine, theirs in ((self.partial, other.partial), (self.done, other.done), (self.failed, other.failed)):
            mine.update({d: v for d, v in theirs.items() if d in devices})
        if other.version is not None or self.version is None:
            self.version = other.version or self.version
            self.info = other.info or self.info  # the last child's that ran devices
            self.import_s = self.import_s if self.import_s is not None else other.import_s

    def absorb(self, other: "FrameworkChildren", todo: List[str], other_todo: List[str]) -> List[str]:
        """Join the results of `other`, a child of the same framework that ran other devices (a
        split run), into this one; returns the devices of both, this one's first. A child that
        failed before its devices is a failure of the devices it was for, never a silent loss."""
        self.merge(other, other_todo)
        if other.fatal is not None and self.fatal is None:
            self.unavailable.append({"id": "gpu", "reason": f"the {self.fw} process for the accelerators "
                                     f"failed: {_s(other.fatal.get('message'))}"})
        elif self.fatal is not None and other.fatal is None:
            cpu = [d for d in self.order if self.meta[d].get("kind") == "cpu"][:1]
            for d in cpu:
                self.failed[d] = {"ended": _s(self.fatal.get("ended")) or "error", "stage": self.fatal.get("stage"),
                                  "message": _s(self.fatal.get("message")) or f"the {self.fw} process failed"}
            todo = cpu
            self.fatal = None
        return todo + [d for d in other_todo if d not in todo]


def device_todo(meta: Dict[str, JsonObject], order: List[str], request: Optional[str],
                 baseline: bool = True) -> List[str]:
    """Devices to run for a request: the matches, plus the CPU as the baseline when anything matched
    (unless `baseline` is off: the accelerators' child of a split run, whose CPU runs beside it)."""
    hits = [d for d in order if wanted(meta[d], request)]
    if baseline and request and hits and not any(meta[d]["kind"] == "cpu" for d in hits):
        hits = [d for d in order if meta[d]["kind"] == "cpu"][:1] + hits
    return hits


def run_torch_or_tf(run: FrameworkChildren, request: Optional[str], speed_only: bool = False,
                     baseline: bool = True, cpu_only: bool = False) -> List[str]:
    """One child for all of the framework's devices (`request`: the ones matching it, with the CPU as
    the baseline unless `baseline` is off), again after a crash for those left. `cpu_only`: the child
    starts no accelerator and lists only the CPU (torch and jax; a CPU peer, a split run's CPU half)."""
    cfg: JsonObject = {"speed_only": speed_only}
    if cpu_only:
        cfg["cpu_only"] = True
    if request:
        cfg["devices"] = [request]
        cfg["cpu_baseline"] = baseline
    res = run.child(cfg)
    if run.fatal is not None:
        return []
    todo = device_todo(run.meta, run.order, request, baseline)
    # A crash or a hang costs the device it happened on, not the ones after it: start again.
    attempts = 0
    while not res.clean and run.remaining(todo) and attempts < len(todo):
        attempts += 1
        before = len(run.done) + len(run.failed)
        left: List[JsonValue] = list(run.remaining(todo))
        res = run.child(dict(cfg, devices=left, cpu_baseline=False))
        if run.fatal is not None or len(run.done) + len(run.failed) == before:
            break
    for d in run.remaining(todo):
        run.failed[d] = {"ended": "skipped", "stage": None,
                         "message": f"not run: the {run.fw} process stopped before reaching {d}"}
    return todo


# A framework's CPU and its accelerators in two children at once (split_devices): on a machine with
# the cores and the memory for both, the imports, the accelerator's start-up and the untimed stages
# overlap; the timed loops still take turns at the gate. MLPROBE_VERIFY_SPLIT=0/1 decides by hand.
SPLIT_FRAMEWORKS = ("torch", "jax")
SPLIT_MIN_CPUS = 8
SPLIT_MIN_FREE_BYTES = 4 << 30
ACCELERATOR_NODES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dri/renderD*", "/dev/dxg", "/dev/accel/accel*",
                     "/dev/davinci[0-9]*")


def split_devices(fw: str, found: Found, device: Optional[str], gate: Optional[TimingGate],
                  environ: Mapping[str, str] = os.environ) -> bool:
    """Run `fw`'s CPU and its accelerators in two children at once? Only torch and jax, whose CPU
    child can start without the GPU (TensorFlow would reserve most of the GPU's memory in both;
    PlaidML runs a child per device already), in the overlapped schedule, without a --device
    request, where the build can have an accelerator, the machine shows one (Linux: its device
    nodes) and has the cores and the free memory for a second process."""
    if fw not in SPLIT_FRAMEWORKS or device or gate is None:
        return False
    asked = environ.get("MLPROBE_VERIFY_SPLIT")
    if asked in ("0", "1"):
        return asked == "1"
    if (found.version or "").endswith("+cpu"):
        return False
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cpus < SPLIT_MIN_CPUS:
        return False
    if sys.platform.startswith("linux"):
        import glob

        if not any(glob.glob(pattern) for pattern in ACCELERATOR_NODES):
            return False
    try:
        import psutil  # type: ignore[import-untyped,unused-ignore]

        return bool(psutil.virtual_memory().available >= SPLIT_MIN_FREE_BYTES)
    except Exception:
        return True


def run_split(run: FrameworkChildren) -> List[str]:
    """The CPU in `run`'s child, the accelerators in a second child at the same time; their results
    joined into `run` (the CPU first, as one child lists them)."""
    accel = run.spawn()
    todo, accel_todo = _each([partial(run_torch_or_tf, run, "cpu", cpu_only=True),
                              partial(run_torch_or_tf, accel, "gpu", baseline=False)], True)
    return run.absorb(accel, todo, accel_todo)


def _each(jobs: Sequence[Callable[[], T]], together: bool) -> List[T]:
    """Run the jobs one after another, or all at once (a thread each; the timing gate keeps their
    timed loops apart); their results in the order given, an exception raised again here."""
    if not together or len(jobs) < 2:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="verify-child") as pool:
        futures = [pool.submit(job) for job in jobs]
        return [f.result() for f in futures]


def run_plaidml(run: FrameworkChildren, request: Optional[str], speed_only: bool = False) -> List[str]:
    """PlaidML opens one device per process, chosen by PLAIDML_DEVICE_IDS: list the devices first (its
    stable set, then with PLAIDML_EXPERIMENTAL=1 unless the user turned that off), then a child per
    device. In the overlapped schedule the listings run at once, and so do the devices' children."""
    together = run.opts.gate is not None
    modes = ["0"] + (["1"] if os.environ.get("PLAIDML_EXPERIMENTAL") != "0" else [])

    def listing(experimental: str) -> FrameworkChildren:
        sub = run.spawn()
        # an empty PLAIDML_DEVICE_IDS keeps a device list in ~/.plaidml from narrowing the enumeration
        sub.child({"enumerate_only": True}, {"PLAIDML_EXPERIMENTAL": experimental, "PLAIDML_DEVICE_IDS": ""})
        return sub

    if together:
        listings = _each([partial(listing, m) for m in modes], True)
    else:  # one after the other, and none after a failure
        listings = []
        for m in modes:
            listings.append(listing(m))
            if listings[-1].fatal is not None:
                break
    for sub in listings:
        run.merge(sub, ())
        if sub.fatal is not None:
            run.fatal = sub.fatal
            return []
    stable = set(listings[0].order)
    cpu_first = sorted(run.order, key=lambda d: run.meta[d]["kind"] != "cpu")
    todo = device_todo(run.meta, cpu_first, "cpu" if speed_only else request)
    for did in todo:
        run.meta[did]["experimental"] = did not in stable

    def device(did: str) -> FrameworkChildren:
        sub = run.spawn()
        sub.meta, sub.order = {d: dict(m) for d, m in run.meta.items()}, list(run.order)
        env = {"PLAIDML_DEVICE_IDS": did, "PLAIDML_EXPERIMENTAL": "0" if did in stable else "1"}
        sub.child({"devices": [did], "speed_only": speed_only}, env)
        if did not in sub.done and did not in sub.failed:
            fatal: JsonObject = sub.fatal or {}
            msg = _s(fatal.get("message")) or "the PlaidML process stopped without a result"
            sub.failed[did] = {"ended": "error", "stage": fatal.get("stage"), "message": msg}
        return sub

    for did, sub in zip(todo, _each([partial(device, did) for did in todo], together)):
        run.merge(sub, [did])
    return todo
