"""A node's report boiled down to what a fleet compares: hardware, drivers and runtimes, framework
builds, the plan's choice per framework, installed-build findings and verify speeds. This is where the
fleet reads a report (a file's, or a Ray task's answer): once, into a NodeSummary (fleet/model.py),
small (a few hundred bytes), so that 10,000 nodes fit in memory after each full report is dropped.
Grouping, rendering and the HTML page work on the summaries."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Dict, List, Optional, Tuple

from ..model.jsontypes import JsonObject, JsonValue
from .model import InstalledBuild, NodeCpu, NodeGpu, NodeSummary, PlanChoice, PlanChoices, VerifySpeed

# What one node may put into the fleet report: a report's text and lists are cut to these, so that a
# node with a 60 MiB GPU name or 300,000 framework entries costs the fleet a few kB like any other
# (the summary says what was cut, under `capped`).
MAX_TEXT = 256
MAX_GPUS = 64
MAX_FRAMEWORKS = 256
MAX_ITEMS = 64  # installed findings, verify results, frameworks in the plan, packages, variables


def _s(v: JsonValue) -> Optional[str]:
    if not isinstance(v, str) or not v:
        return None
    return v if len(v) <= MAX_TEXT else v[: MAX_TEXT - 1] + "…"


def _capped(v: JsonValue, limit: int, what: str, notes: List[str]) -> List[JsonValue]:
    items = _list(v)
    if len(items) > limit:
        notes.append(f"{what}: {len(items)} entries, the first {limit} kept")
        return items[:limit]
    return items


def _num(v: JsonValue) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:  # an int no float holds
        return None
    return f if math.isfinite(f) else None


def _int(v: JsonValue) -> Optional[int]:
    return v if isinstance(v, int) else None


def _dict(v: JsonValue) -> JsonObject:
    return v if isinstance(v, dict) else {}


def _list(v: JsonValue) -> List[JsonValue]:
    return v if isinstance(v, list) else []


def _objects(items: List[JsonValue]) -> List[JsonObject]:
    return [i for i in items if isinstance(i, dict)]


def gpu_summary(g: JsonObject) -> NodeGpu:
    return NodeGpu(
        vendor=_s(g.get("vendor")),
        name=_s(g.get("name")),
        compute_capability=_s(g.get("compute_capability")),
        gfx_target=_s(g.get("gfx_target")) or _s(g.get("runtime_gfx_target")),
        driver_version=_s(g.get("driver_version")),
        memory_bytes=_int(g.get("memory_bytes")),
    )


def framework_build(f: JsonObject) -> Optional[str]:
    """`torch 2.11.0 cu130`: name, version and the build flavour when the scan knows it."""
    name = _s(f.get("name"))
    if not name:
        return None
    parts = [name, _s(f.get("version")) or "?"]
    flavour = _s(f.get("flavour"))
    if flavour and flavour not in (parts[1].split("+")[-1],):
        parts.append(flavour)
    return " ".join(parts)


def _plan_choice(plan: JsonObject, notes: List[str]) -> PlanChoices:
    """Per framework: the recipe the plan puts first and what installing it takes."""
    top = _dict(plan.get("top"))
    recommended = _objects(_capped(plan.get("recommended"), MAX_ITEMS * 4, "plan.recommended", notes))
    by_recipe: Dict[str, JsonObject] = {}
    for r in recommended:
        name = r.get("recipe")
        if isinstance(name, str):
            by_recipe[name] = r
    out: Dict[str, Optional[PlanChoice]] = {}
    items = sorted(top.items(), key=lambda kv: kv[0])
    if len(items) > MAX_ITEMS:
        notes.append(f"plan.top: {len(items)} frameworks, the first {MAX_ITEMS} kept")
        items = items[:MAX_ITEMS]
    for fw_key, recipe_v in items:
        fw = _s(fw_key) or "?"
        recipe = _s(recipe_v)
        if recipe is None:
            out[fw] = None
            continue
        r = by_recipe.get(recipe_v, {}) if isinstance(recipe_v, str) else {}
        env_items = list(_dict(r.get("env")).items())
        if len(env_items) > MAX_ITEMS:
            notes.append(f"plan env of {fw}: {len(env_items)} variables, the first {MAX_ITEMS} kept")
        packages = _capped(r.get("packages"), MAX_ITEMS, f"plan packages of {fw}", notes)
        out[fw] = PlanChoice(
            recipe=recipe,
            backend=_s(r.get("backend")),
            index_url=_s(r.get("index_url")),
            packages=tuple(p for p in (_s(p) for p in packages) if p),
            env={_s(k) or "?": _s(v) or "" for k, v in env_items[:MAX_ITEMS] if isinstance(v, str)},
        )
    return out


def _installed(plan: JsonObject, notes: List[str]) -> Tuple[InstalledBuild, ...]:
    return tuple(
        InstalledBuild(package=_s(i.get("package")), version=_s(i.get("version")), build=_s(i.get("build")),
                       status=_s(i.get("status")), message=_s(i.get("message")))
        for i in _objects(_capped(plan.get("installed"), MAX_ITEMS, "plan.installed", notes)))


def _verify(verify: JsonObject, notes: List[str]) -> Tuple[VerifySpeed, ...]:
    """Verify speeds per device (the Keras-MNIST CNN's images/s), where the report carries them."""
    out = []
    for r in _objects(_capped(verify.get("results"), MAX_ITEMS, "verify.results", notes)):
        speed = _num(_dict(r.get("speed")).get("images_per_s"))
        out.append(VerifySpeed(
            framework=_s(r.get("framework")),
            framework_version=_s(r.get("framework_version")),
            device=_s(r.get("device")),
            name=_s(r.get("name")),
            kind=_s(r.get("kind")),
            verdict=_s(r.get("verdict")),
            images_per_s=round(speed, 1) if speed is not None else None,
        ))
    return tuple(out)


def _gpu_order(g: NodeGpu) -> Tuple[str, ...]:
    return tuple(str(v) for v in (g.vendor, g.name, g.compute_capability, g.gfx_target, g.driver_version,
                                  g.memory_bytes))


def summarize(doc: JsonObject) -> NodeSummary:
    """The fleet's view of one report (`mlprobe report`) or scan JSON (`mlprobe scan --json`), read
    leniently: a value of another type than expected is unknown. The document has passed
    mlprobe.model.validate.check_document, so most types are as expected."""
    scan = _dict(doc.get("scan")) if "scan" in doc else doc
    plan = _dict(doc.get("plan"))
    cpu = _dict(scan.get("cpu"))
    rt = _dict(scan.get("runtimes"))
    cuda = _dict(rt.get("cuda"))
    notes: List[str] = []
    gpus = sorted((gpu_summary(g) for g in _objects(_capped(scan.get("gpus"), MAX_GPUS, "scan.gpus", notes))),
                  key=_gpu_order)
    builds = sorted({b for f in _objects(_capped(scan.get("frameworks"), MAX_FRAMEWORKS, "scan.frameworks", notes))
                     for b in [framework_build(f)] if b})
    drivers = sorted({d for d in [_s(cuda.get("driver_version"))] + [g.driver_version for g in gpus] if d})
    level = cpu.get("x86_64_level")
    src = _dict(scan.get("source"))
    source = {k: v for k in ("kind", "bundle", "via") for v in [_s(src.get(k))] if v} or None
    osd = _dict(scan.get("os"))
    long_text = any(isinstance(v, str) and len(v) > MAX_TEXT for v in _strings_seen(doc))
    return NodeSummary(
        cpu=NodeCpu(
            vendor=_s(cpu.get("vendor")),
            model=_s(cpu.get("model")),
            arch=_s(cpu.get("arch")),
            x86_64_level=level if isinstance(level, int) and not isinstance(level, bool) else None,
            threads=_int(cpu.get("threads")),
        ),
        gpus=tuple(gpus),
        driver=", ".join(drivers) if drivers else None,
        cuda=_s(cuda.get("version")),
        rocm=_s(_dict(rt.get("rocm")).get("version")),
        frameworks=tuple(builds),
        os=_s(osd.get("distro")) or _s(osd.get("system")),
        python=_s(_dict(scan.get("python")).get("version")),
        mlprobe_version=_s(doc.get("mlprobe_version")),
        source=source,
        plan=_plan_choice(plan, notes) if plan else None,
        installed=_installed(plan, notes),
        verify=_verify(_dict(doc.get("verify")), notes),
        capped=tuple(notes + ([f"text longer than {MAX_TEXT} characters cut"] if long_text else [])) or None,
    )


def _strings_seen(doc: JsonObject) -> List[JsonValue]:
    """The report's strings the summary reads (to say when one was cut)."""
    scan = _dict(doc.get("scan")) if "scan" in doc else doc
    cpu = _dict(scan.get("cpu"))
    out: List[JsonValue] = [cpu.get(k) for k in ("vendor", "model", "arch")]
    for g in _objects(_list(scan.get("gpus"))[:MAX_GPUS]):
        out += [g.get(k) for k in ("vendor", "name", "compute_capability", "gfx_target", "driver_version")]
    for f in _objects(_list(scan.get("frameworks"))[:MAX_FRAMEWORKS]):
        out += [f.get(k) for k in ("name", "version", "flavour")]
    return out


def hardware_key(s: NodeSummary) -> str:
    """What makes two nodes the same hardware: CPU model, architecture and x86-64 level, and every GPU
    with its target (CUDA compute capability or AMD gfx)."""
    gpus = [[g.vendor, g.name, g.compute_capability, g.gfx_target] for g in s.gpus]
    return json.dumps([s.cpu.arch, s.cpu.model, s.cpu.x86_64_level,
                       sorted(gpus, key=lambda g: tuple(str(v) for v in g))])


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:10]


def hardware_label(s: NodeSummary) -> str:
    cpu = s.cpu
    bits = [cpu.model or "CPU unknown"]
    if cpu.x86_64_level:
        bits.append(f"x86-64-v{cpu.x86_64_level}")
    elif cpu.arch:
        bits.append(cpu.arch)
    counts: Dict[str, int] = {}
    for g in s.gpus:
        target = g.compute_capability and f"sm {g.compute_capability}" or g.gfx_target
        name = (g.name or g.vendor or "GPU") + (f" ({target})" if target else "")
        counts[name] = counts.get(name, 0) + 1
    gpus = ", ".join(f"{n}x {name}" for name, n in counts.items()) or "no GPU"
    return f"{', '.join(bits)}; {gpus}"
