"""Runs every probe concurrently through a Host, merges their contributions into one Facts, and
records each probe's status. A probe that hangs, crashes or reads garbage costs only itself."""

from __future__ import annotations

import re
import time
from collections import Counter
import queue
import threading
from concurrent.futures import Future, TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .. import probes as registry
from ..errors import LibraryError
from ..model.facts import Contribution, CpuFacts, Facts, GpuFacts, ProbeStatus, Runtimes
from .capture import Host

# Overall wall-clock limit for one probe (its captures have their own, shorter limits).
PROBE_DEADLINE_S = 30.0
# More GPUs than this from one source is not a machine (the largest single systems have a few
# hundred accelerators): the rest are dropped with a warning, so a hostile capture costs seconds.
MAX_GPUS_PER_SOURCE = 1024


def run_probe(name: str, module: str, host: Host) -> Tuple[Contribution, float]:
    started = time.perf_counter()
    try:
        fn = registry.load(module)
        contrib = fn(host)
        if not isinstance(contrib, Contribution):
            raise TypeError(f"probe {name} returned {type(contrib).__name__}, not Contribution")
    except Exception as exc:  # the probe's own bug: record it, keep the scan going
        contrib = Contribution(status="error", error=f"{type(exc).__name__}: {exc}")
    return contrib, time.perf_counter() - started


class _DaemonPool:
    """A few daemon worker threads: unlike ThreadPoolExecutor's, a probe still running when the scan
    gives up on it is not joined at interpreter exit (mlprobe exits once its output is written)."""

    def __init__(self, workers: int) -> None:
        self._jobs: "queue.Queue[Optional[Tuple[Future[Any], Callable[..., Any], Tuple[Any, ...]]]]" = queue.Queue()
        self._workers = workers
        self.threads = [threading.Thread(target=self._work, name=f"probe-{i}", daemon=True) for i in range(workers)]
        for t in self.threads:
            t.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fut, fn, args = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # handed to the waiting scan
                fut.set_exception(exc)

    def submit(self, fn: Callable[..., Any], *args: Any) -> "Future[Any]":
        fut: "Future[Any]" = Future()
        self._jobs.put((fut, fn, args))
        return fut

    def close(self) -> None:
        for _ in range(self._workers):
            self._jobs.put(None)


def scan(host: Host, only: Optional[List[str]] = None) -> Facts:
    def wanted(name: str) -> bool:
        return only is None or name in only

    probes = [(n, m) for n, m in registry.builtin() if wanted(n)]
    results: Dict[str, Tuple[Contribution, float]] = {}
    # Live probes wait on tools and devices: all at once. A replay only parses files (bounded by the
    # capture size caps): two worker threads do it faster than a thread per probe contending for the
    # interpreter (H200 bundle: 54 vs 62 ms median), and a parser that never ends still leaves the
    # other thread to finish the rest before the deadline.
    workers = 2 if host.kind == "replay" else len(probes) + 4
    pool = _DaemonPool(workers)
    futures: List[Tuple[str, Future[Tuple[Contribution, float]]]] = []
    started = time.perf_counter()
    late = False
    for name, module in probes:
        futures.append((name, pool.submit(run_probe, name, module, host)))
    # Third-party probes: looking up entry points reads every installed distribution's
    # metadata, so it runs while the built-in probes already work.
    for name, module in registry.plugins():
        if wanted(name) and name not in dict(probes):
            probes.append((name, module))
            futures.append((name, pool.submit(run_probe, name, module, host)))
    for name, fut in futures:
        left = max(0.0 if late else 0.1, PROBE_DEADLINE_S - (time.perf_counter() - started))
        try:
            results[name] = fut.result(timeout=left)
        except FutureTimeout:
            late = True
            results[name] = (
                Contribution(status="timeout", error=f"did not finish within {PROBE_DEADLINE_S:g} s"),
                PROBE_DEADLINE_S,
            )
    pool.close()
    if late:
        # The probes still running are given up: the tools they (or a prefetch) wait for are ended
        # with their process groups, and none of those threads starts another. They are daemon
        # threads, so the interpreter's exit does not wait for them either.
        from .live.proc import abandon

        close = getattr(host, "close_tools", None)
        if close is not None:
            close(f"the scan stopped waiting for its tools after {PROBE_DEADLINE_S:g} s")
        helpers = getattr(host, "threads", None)  # a live host's prefetch threads, which probes wait on
        abandon([*pool.threads, *(helpers() if helpers is not None else [])])
    return merge(host, [(n, *results[n]) for n, _ in probes])


def _score_name(name: Optional[str]) -> str:
    if not name:
        return ""
    s = name.lower()
    s = re.sub(r"\((r|tm)\)|®|™", " ", s)
    s = re.sub(r"\b(nvidia|amd|ati|intel|corporation|advanced micro devices, inc\.|inc|graphics|series|"
               r"gpu|device|apple)\b", " ", s)
    return " ".join(re.sub(r"[^a-z0-9]+", " ", s).split())


def _same_gpu(a: GpuFacts, b: GpuFacts) -> bool:
    if a.vendor != b.vendor and "unknown" not in (a.vendor, b.vendor):
        return False
    if a.pci_bus_id and b.pci_bus_id:
        return a.pci_bus_id == b.pci_bus_id
    if a.uuid and b.uuid:
        return a.uuid.lower() == b.uuid.lower()
    if a.pci_device_id and b.pci_device_id:
        return a.pci_device_id == b.pci_device_id
    ga = a.runtime_gfx_target or a.gfx_target
    gb = b.runtime_gfx_target or b.gfx_target
    if ga and gb and ga == gb:
        return True
    na, nb = _score_name(a.name), _score_name(b.name)
    if na and nb and (na == nb or na in nb or nb in na):
        return True
    return False


def _combine(a: GpuFacts, b: GpuFacts) -> GpuFacts:
    changes: Dict[str, Any] = {}
    for field_name in a.__dataclass_fields__:
        va, vb = getattr(a, field_name), getattr(b, field_name)
        if field_name in ("apis", "sources", "notes"):
            merged = tuple(dict.fromkeys(tuple(va) + tuple(vb)))
            if merged != va:
                changes[field_name] = merged
        elif field_name == "mig_devices":
            if vb and not va:
                changes[field_name] = vb
        elif va is None and vb is not None:
            changes[field_name] = vb
    if a.vendor == "unknown" and b.vendor != "unknown":
        changes["vendor"] = b.vendor
    return replace(a, **changes) if changes else a


def merge_gpus(observations: List[Tuple[str, List[GpuFacts]]]) -> List[GpuFacts]:
    """One entry per physical device. Observations come grouped by source, in priority order.

    Near-linear: a device of one source is compared only with entries from earlier sources (those
    this source added cannot be the same device twice), and only with those on the same PCI bus id
    or without one (two different bus ids are never the same device)."""
    merged: List[GpuFacts] = []
    for source, gpus in observations:
        base = len(merged)  # entries from earlier sources: the only candidates
        taken: set[int] = set()
        by_bus: Dict[str, List[int]] = {}
        no_bus: List[int] = []
        per_vendor: Dict[str, set[int]] = {}  # untaken candidates by vendor
        for i in range(base):
            m = merged[i]
            if source in m.sources:
                continue
            if m.pci_bus_id:
                by_bus.setdefault(m.pci_bus_id, []).append(i)
            else:
                no_bus.append(i)
            per_vendor.setdefault(m.vendor, set()).add(i)

        def take(i: int) -> None:
            taken.add(i)
            per_vendor.get(merged[i].vendor, set()).discard(i)

        leftovers: List[GpuFacts] = []
        for g in gpus:
            if g.pci_bus_id:
                candidates: Iterable[int] = sorted(by_bus.get(g.pci_bus_id, []) + no_bus)
            else:
                candidates = (i for i in range(base) if source not in merged[i].sources)
            match = next((i for i in candidates if i not in taken and _same_gpu(merged[i], g)), None)
            if match is None:
                leftovers.append(g)
                continue
            take(match)
            merged[match] = _combine(merged[match], g)
        # A lone device of a vendor seen by a lone device of the same vendor is the same device
        # (e.g. lspci's "CoffeeLake-S GT2" and OpenCL's "Intel(R) UHD Graphics 630").
        from_source = Counter(x.vendor for x in gpus)
        for g in leftovers:
            same_vendor = per_vendor.get(g.vendor, set())
            if (len(same_vendor) == 1 and from_source[g.vendor] == 1
                    and not (merged[next(iter(same_vendor))].pci_bus_id and g.pci_bus_id)):
                i = next(iter(same_vendor))
                take(i)
                merged[i] = _combine(merged[i], g)
            else:
                merged.append(replace(g, sources=tuple(dict.fromkeys(g.sources or (source,)))))
    return merged


OVERRIDABLE = ("CPU_FLAGS", "PYTHON_VERSION")


class BadOverride(LibraryError):
    """An MLPROBE_OVERRIDE_<FACT> that mlprobe does not know, or whose value is no value of the fact."""

    def __init__(self, key: str, value: str, where: str, why: str) -> None:
        super().__init__(f"invalid override {key}={value!r} ({where}): {why}")
        self.key = key
        self.value = value
        self.where = where
        self.why = why


def check_overrides(overrides: Dict[str, str], where: str) -> None:
    """An override that is not one mlprobe knows, or whose value is not a value of that fact, is an
    error (BadOverride; exit 2): a silent typo would make a plan for a machine nobody has."""
    known = ", ".join(f"MLPROBE_OVERRIDE_{k}" for k in OVERRIDABLE)
    for key, value in overrides.items():
        fact = key[len("MLPROBE_OVERRIDE_"):]
        why = None
        if fact not in OVERRIDABLE:
            why = f"mlprobe knows these overrides: {known}"
        elif fact == "PYTHON_VERSION" and not re.fullmatch(r"\d+\.\d+(\.\d+)?", value.strip()):
            why = "expected a Python version such as 3.10"
        elif fact == "CPU_FLAGS" and not re.fullmatch(r"[A-Za-z0-9_.]+(\s+[A-Za-z0-9_.]+)*", value.strip()):
            why = "expected CPU flags in /proc/cpuinfo spelling, separated by spaces, e.g. \"sse sse2 avx\""
        if why:
            raise BadOverride(key, value, where, why)


def _apply_overrides(facts: Facts, overrides: Dict[str, str], where: str = "environment") -> Facts:
    """MLPROBE_OVERRIDE_<FACT>: escape hatches for tests and odd machines, recorded in the report."""
    check_overrides(overrides, where)
    used: Dict[str, str] = {}
    cpu = facts.cpu
    for key, value in overrides.items():
        fact = key[len("MLPROBE_OVERRIDE_"):].lower()
        if fact == "cpu_flags":
            from ..model.hw.cpu import x86_64_level

            flags = tuple(sorted(set(value.lower().split())))
            cpu = replace(cpu, flags=flags, x86_64_level=x86_64_level(flags) if cpu.arch == "x86_64" else None)
            used[key] = value
        elif fact == "python_version":
            facts = replace(facts, python=replace(facts.python, version=value.strip()))
            used[key] = value
    if used:
        facts = replace(facts, cpu=cpu, overrides=used)
    return facts


def _x86_family(model: Optional[str]) -> Optional[Dict[str, Any]]:
    from ..model import knowledge as kbase

    for row in kbase.rows("cpu_families", "families"):
        if model and re.search(str(row.get("pattern")), model, re.I):
            return row
    return None


def complete_cpu(cpu: CpuFacts, hints: List[CpuFacts]) -> CpuFacts:
    """The CPU source's facts, completed where it has none (or there is none) by what other tools
    printed of the CPU (hints), then by what the model name implies: a model of an x86 family with
    AVX (cpu_families.json) is an x86-64 CPU, AVX having come only to x86-64 parts. Every architecture
    carries the evidence it came from; nothing is defaulted."""
    changes: Dict[str, Any] = {}
    if cpu.arch and not cpu.arch_evidence and cpu.source:
        changes["arch_evidence"] = cpu.source
    for hint in hints:
        if cpu.model is None and "model" not in changes and hint.model:
            changes.update(model=hint.model, source=cpu.source or hint.source)
            if cpu.vendor is None and hint.vendor:
                changes["vendor"] = hint.vendor
        if cpu.arch is None and "arch" not in changes and hint.arch:
            changes.update(arch=hint.arch, arch_evidence=hint.arch_evidence)
    if changes:
        cpu = replace(cpu, **changes)
    if cpu.arch is None and cpu.model:
        family = _x86_family(cpu.model)
        if family is not None and family.get("avx") is True:
            cpu = replace(cpu, arch="x86_64", vendor=cpu.vendor or family.get("vendor"),
                          arch_evidence=f"the model '{cpu.model}' is an x86 family with AVX "
                                        f"({family.get('family')}; cpu_families.json)")
    return cpu


def cpu_arch_from_gpus(cpu: CpuFacts, gpus: List[GpuFacts]) -> CpuFacts:
    """A product that exists on one CPU architecture only (host_inference.json): a Jetson module,
    a Grace superchip's GPU, an Apple GPU."""
    from ..model import knowledge as kbase

    for row in kbase.rows("host_inference", "rules"):
        implies = row.get("implies")
        arch = implies.get("cpu.arch") if isinstance(implies, dict) else None
        if not isinstance(arch, str):
            continue
        when = row.get("when")
        for g in gpus:
            hit = ((when == "gpu_source" and row.get("source_name") in g.sources)
                   or (when == "gpu_vendor" and row.get("vendor") == g.vendor)
                   or (when == "nvidia_name" and g.vendor == "nvidia" and g.name
                       and re.search(str(row.get("pattern")), g.name)))
            if hit:
                # the plan's name for 64-bit ARM is arm64; the report keeps Linux's aarch64 off macOS
                value = "aarch64" if arch == "arm64" and g.vendor != "apple" else arch
                what = ("is a Jetson board" if when == "gpu_source" else
                        "sits on a Grace superchip" if when == "nvidia_name" else f"is an {g.vendor.capitalize()} GPU")
                return replace(cpu, arch=value, arch_evidence=f"{g.name or g.vendor} {what}, found only with "
                                                               f"{value} CPUs (host_inference.json)")
    return cpu


def merge(host: Host, parts: List[Tuple[str, Contribution, float]]) -> Facts:
    from ..model.facts import MemoryFacts, OsFacts, PythonFacts

    statuses = [
        ProbeStatus(name=name, status=c.status, seconds=round(secs, 4), error=c.error)
        for name, c, secs in parts
    ]
    def pick(attr: str, default: Any) -> Any:
        """The first probe (in PROBES order) that set this fact wins."""
        return next((getattr(c, attr) for _, c, _ in parts if getattr(c, attr) is not None), default)

    os_f = pick("os", OsFacts())
    cpu = pick("cpu", CpuFacts())
    cpu = complete_cpu(cpu, [h for _, c, _ in parts for h in c.cpu_hints])
    mem = pick("memory", MemoryFacts())
    py = pick("python", PythonFacts())
    # collect_env pastes know OS/CPU facts too; they come after the real sources in `parts`.
    order = {s: i for i, s in enumerate(registry.GPU_SOURCE_ORDER)}
    gpu_groups = sorted(
        ((name, list(c.gpus)) for name, c, _ in parts if c.gpus),
        key=lambda t: order.get(t[0], len(order)),
    )
    capped: List[str] = []
    for i, (name, found) in enumerate(gpu_groups):
        if len(found) > MAX_GPUS_PER_SOURCE:
            capped.append(f"the {name} capture lists {len(found):,} GPUs; only the first {MAX_GPUS_PER_SOURCE:,} "
                          "are kept (no machine has that many: the capture is probably corrupt or made up)")
            gpu_groups[i] = (name, found[:MAX_GPUS_PER_SOURCE])
    gpus = merge_gpus(gpu_groups)
    runtimes = Runtimes()
    for _, c, _ in parts:
        runtimes = runtimes.merged(c.runtimes)
    frameworks: List[Any] = []
    seen_fw: set[str] = set()
    # The installed distributions (frameworks probe) outrank what a pasted collect_env says.
    for _, c, _ in sorted(parts, key=lambda t: t[0] != "frameworks"):
        for fw in c.frameworks:
            if fw.name not in seen_fw:
                seen_fw.add(fw.name)
                frameworks.append(fw)
    usb = [u for _, c, _ in parts for u in c.usb_accelerators]
    warnings = [w for _, c, _ in parts for w in c.warnings] + capped
    if cpu.arch is None:
        cpu = cpu_arch_from_gpus(cpu, gpus)
    facts = Facts(
        os=os_f, cpu=cpu, memory=mem, python=py, gpus=tuple(gpus), runtimes=runtimes,
        frameworks=tuple(frameworks), usb_accelerators=tuple(usb), probes=tuple(statuses),
    )
    facts = _apply_overrides(facts, host.env_overrides(),
                             "the bundle's host.json" if host.kind == "replay" else "the environment")
    facts = replace(facts, warnings=tuple(dict.fromkeys(warnings + hardware_warnings(facts))))
    return facts


def hardware_warnings(facts: Facts) -> List[str]:
    """Plain sentences for what matters before anything is installed."""
    out: List[str] = []
    cpu = facts.cpu
    if cpu.arch == "x86_64" and cpu.flags and "avx" not in cpu.flags:
        out.append("no AVX: stock TensorFlow wheels crash with \"Illegal instruction\" on this CPU; "
                   "PyTorch's CPU build still runs")
    nv = [g for g in facts.gpus if g.vendor == "nvidia"]
    driven = [g for g in nv if "nvidia" in g.sources]
    bus_only = [g for g in nv if "nvidia" not in g.sources and "pci" in g.sources]
    if driven and bus_only:
        out.append(
            f"lspci lists {len(driven) + len(bus_only)} NVIDIA GPUs but the driver (nvidia-smi) sees "
            f"{len(driven)}: " + ", ".join(f"{g.name or 'NVIDIA GPU'} at {g.pci_bus_id or '?'}" for g in bus_only)
            + " is not driven (no driver bound, disabled or failed); CUDA can use only what nvidia-smi lists")
    for g in facts.gpus:
        if g.vendor == "amd" and g.gfx_target and g.runtime_gfx_target and g.gfx_target != g.runtime_gfx_target:
            out.append(f"{g.name or 'AMD GPU'} is {g.gfx_target} but the ROCm runtime reports "
                       f"{g.runtime_gfx_target}: HSA_OVERRIDE_GFX_VERSION is in effect (unofficial)")
    return out


def facts_to_report(facts: Facts, source: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The scan report (`mlprobe scan --json`), report_version 1, as JSON."""
    from ..model.facts import ScanReport

    return ScanReport.of(facts, source).to_json()
