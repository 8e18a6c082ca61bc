"""The named tests conditions call (`{"test": "cuda_archs_cover", ...}`): the judgements that need
more than one comparison, each over sourced knowledge tables, each writing its own sentences.
Importing this module registers them in mlprobe.plan.conditions.TESTS."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

from .conditions import Effects, Outcome, cc_tuple, fmt, resolve, strs, test
from ..model.context import AmdGpu, RulesContext
from ..model.facts import GpuFacts
from ..model.knowledge import Knowledge, Row, newest_cuda, version


def _toolkit_rows(kb: Knowledge) -> Tuple[Row, ...]:
    return tuple(r for r in kb.rows("nvidia_gpus", "cuda_toolkit_min_driver") if r.get("cuda"))


def _driver_column(ctx: RulesContext) -> str:
    # In WSL2 the driver is the Windows one (nvidia-smi there prints the Windows number).
    if ctx.os.system == "Windows" or ctx.os.wsl:
        return "windows"
    return "linux"


def _threshold(row: Row, column: str) -> Optional[str]:
    value = row.text(column)
    if value is None and column == "windows":
        value = row.text("linux")  # NVIDIA publishes no Windows number for 13.x [inference: same branch]
    return value


def ceiling_words(ctx: RulesContext, kb: Knowledge) -> str:
    """'CUDA 12.8', or what can be said when the driver predates every row of the table."""
    c = cuda_ceiling(ctx, kb)
    if c:
        return f"CUDA {c}"
    rows = _toolkit_rows(kb)
    if rows and version(ctx.nvidia.driver) is not None:
        oldest = min(rows, key=lambda r: version(r.get("cuda")))  # type: ignore[arg-type, return-value]
        return f"a CUDA older than {oldest.get('cuda')}"
    return "an unknown CUDA version"


def cuda_ceiling(ctx: RulesContext, kb: Knowledge) -> Optional[str]:
    """The newest CUDA the driver supports natively: nvidia-smi says it, or the toolkit table."""
    stated = ctx.nvidia.cuda_version
    if stated:
        return str(stated)
    return newest_cuda([r.doc for r in _toolkit_rows(kb)], ctx.nvidia.driver, _driver_column(ctx),
                       infer_windows=True)


@test("cuda_driver_runs")
def _cuda_driver_runs(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    need = str(resolve(cond.get("cuda"), ctx, row))
    label = fmt(cond.text("label", "CUDA {row.cuda}") or "", ctx, row)
    driver = ctx.nvidia.driver
    ceiling = cuda_ceiling(ctx, kb)
    need_v = version(need)
    if ceiling is not None and version(ceiling) >= need_v:  # type: ignore[operator]
        return Outcome(True)
    column = _driver_column(ctx)
    major = need_v.major if need_v is not None else None
    compat = next((r for r in kb.rows("nvidia_gpus", "cuda_minor_compat") if r.get("major") == major), None)
    minimum = _threshold(compat, column) if compat else None
    native = next((_threshold(r, column) for r in _toolkit_rows(kb) if r.text("cuda") == need), None)
    if driver is None:
        if ceiling is None:
            return Outcome(
                None,
                unknown=[
                    f"the NVIDIA driver version is unknown, so {label} (CUDA {need}) "
                    "could not be checked against it"
                ],
            )
        return Outcome(
            None,
            unknown=[
                f"the driver supports CUDA {ceiling} but its version is unknown, so "
                f"CUDA {need} minor-version compatibility could not be checked"
            ],
        )
    if minimum and version(driver) >= version(minimum):  # type: ignore[operator]
        note = (
            f"driver {driver} supports {ceiling_words(ctx, kb)}; the {label} wheels (CUDA {need}) run on it "
            f"through CUDA minor-version compatibility (CUDA {major}.x needs a driver >= {minimum})"
        )
        if native:
            note += f"; a driver >= {native} runs CUDA {need} natively"
        return Outcome(True, warnings=[note], tags=["compat"])
    why = (
        f"the NVIDIA driver {driver} supports {ceiling_words(ctx, kb)}; {label} (CUDA {need}) needs a driver"
    )
    why += f" >= {minimum}" if minimum else f" >= {native}" if native else " newer than this one"
    return Outcome(False, reasons=[why])


def arch_coverage(archs: Sequence[str], cc: str) -> Optional[str]:
    """'cubin' when a compiled binary runs on this compute capability, 'ptx' when only PTX JIT does."""
    have = cc_tuple(cc)
    via_ptx = False
    for a in archs:
        base, _, extra = str(a).partition("+")
        if base.endswith(("a", "f")):  # sm_90a-style targets run only on that exact chip
            continue
        arch = cc_tuple(base)
        if arch[0] == have[0] and arch[1] <= have[1]:
            return "cubin"
        if extra.upper() == "PTX" and arch <= have:
            via_ptx = True
    return "ptx" if via_ptx else None


def series_covering(cc: str, kb: Knowledge) -> List[str]:
    """The wheel series (cu126, cu128, ...) whose x86_64 builds carry code for `cc`, oldest first."""
    seen: Dict[str, str] = {}
    for r in kb.rows("torch_wheels", "cuda"):
        if r.get("archs") and arch_coverage(r.texts("archs"), cc) is not None:
            seen.setdefault(str(r.get("index")), r.text("cuda", "") or "")
    return sorted(seen, key=lambda idx: version(seen[idx]) or version("0"))  # type: ignore[arg-type, return-value]


@test("cuda_archs_cover")
def _cuda_archs_cover(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    archs = strs(resolve(cond.get("archs"), ctx, row))
    if ctx.cpu.arch == "arm64" and "archs_aarch64" in cond:
        arm = resolve(cond.get("archs_aarch64"), ctx, row)
        if arm is not None:
            archs = strs(arm)
    label = fmt(cond.text("label", "these wheels") or "", ctx, row)
    if not archs:
        return Outcome(False, reasons=[f"{label} have no build for {ctx.cpu.arch or 'this CPU'}"])
    need = str(resolve(cond.get("cuda", "0"), ctx, row))
    ceiling = cuda_ceiling(ctx, kb)
    out = Outcome(True)
    shown = ", ".join(
        f"sm_{a.replace('.', '').replace('+PTX', '')}" + ("+PTX" if "+PTX" in a else "") for a in archs
    )
    for gpu in ctx.nvidia.gpus:
        cc = gpu.cc
        name = gpu.name or "the NVIDIA GPU"
        if not cc:
            out.value = None if out.value is not False else False
            out.unknown.append(
                f"the compute capability of {name} is unknown, so it could not be checked "
                f"against {label} ({shown})"
            )
            continue
        how = arch_coverage(archs, cc)
        sm = "sm_" + cc.replace(".", "")
        if how == "cubin":
            continue
        if how == "ptx":
            if ceiling is not None and version(ceiling) < version(need):  # type: ignore[operator]
                out.value = False
                out.reasons.append(
                    f"{label} carry only PTX that fits {name} ({sm}), and JIT-compiling it needs "
                    f"a driver for CUDA {need} (this one supports CUDA {ceiling})"
                )
            else:
                out.warnings.append(
                    f"{name} ({sm}) runs {label} through PTX JIT: the first run compiles "
                    "kernels and takes longer"
                )
            continue
        out.value = False
        why = f"{label} are built for {shown}; {name} is {sm}"
        covering = series_covering(cc, kb)
        if covering:
            why += f" (PyTorch's {', '.join(covering)} wheels carry code for {sm})"
        out.reasons.append(why)
    return out


@test("cuda_min_cc")
def _cuda_min_cc(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    minimum = str(resolve(cond.get("min"), ctx, row))
    label = fmt(cond.text("label", "this build") or "", ctx, row)
    out = Outcome(True)
    for gpu in ctx.nvidia.gpus:
        cc = gpu.cc
        if not cc:
            out.value = None if out.value is not False else False
            out.unknown.append(f"the compute capability of {gpu.name} is unknown")
        elif cc_tuple(cc) < cc_tuple(minimum):
            out.value = False
            out.reasons.append(f"{label} needs compute capability >= {minimum}; {gpu.name} is {cc}")
    return out


def _by_gfx(kb: Knowledge, key: str) -> Dict[str, Row]:
    return {str(r.get("gfx")): r for r in kb.rows("rocm", key)}


@test("rocm_gfx_supported")
def _rocm_gfx_supported(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    built = set(strs(resolve(cond.get("gfx"), ctx, row)))
    label = fmt(cond.text("label", "these wheels") or "", ctx, row)
    targets = ctx.amd.targets
    overrides = _by_gfx(kb, "overrides")
    breaks = _by_gfx(kb, "override_breaks")
    dropped = _by_gfx(kb, "not_in_rocm_matrix")
    out = Outcome(True)
    env_values = set()
    per_gpu: Dict[int, str] = {}  # index among the AMD GPUs -> override
    env: Dict[str, str] = {}
    for gpu in targets:
        gfx, name = gpu.gfx, gpu.name or "the AMD GPU"
        if not gfx:
            # No evidence, no ROCm: an install that cannot work costs more than a missed one.
            out.value = False
            out.reasons.append(
                f"the gfx target of {name} is unknown (no rocminfo in the capture, and its PCI id "
                "is not in mlprobe's table), so ROCm support cannot be confirmed"
            )
            continue
        if gfx in built:
            if gfx in dropped:
                out.warnings.append(f"{name} ({gfx}): {dropped[gfx].get('note')}")
            continue
        ov = overrides.get(gfx)
        if ov and ov.text("runs_as") in built:
            env_values.add(str(ov.get("override")))
            per_gpu[gpu.index] = str(ov.get("override"))
            text = (
                f"{label} are not built for {gfx} ({name}); "
                f"HSA_OVERRIDE_GFX_VERSION={ov.get('override')} runs it "
                f"as {ov.get('runs_as')} (unofficial)"
            )
            if gpu.runtime_gfx == ov.get("runs_as"):
                text += "; the scan shows the override already in effect"
            if ov.get("caveat"):
                text += f"; {ov.get('caveat')}"
            out.warnings.append(text)
            out.effects.unofficial = True
            continue
        out.value = False
        if gfx in breaks:
            b = breaks[gfx]
            out.reasons.append(
                f"{label} are not built for {gfx} ({name}), and no override maps it to a built "
                f"target (HSA_OVERRIDE_GFX_VERSION={b.get('override')}: {b.get('why')})"
            )
        else:
            out.reasons.append(
                f"{label} are not built for {gfx} ({name}), and no known override maps it to "
                f"one they are built for ({', '.join(sorted(built))})"
            )
    if not targets:
        return Outcome(False, reasons=["no AMD GPU was found"])
    if env_values:
        found, why = override_env(ctx.amd.gpus, targets, per_gpu)
        if found is None:
            out.value = False
            out.reasons.append(why)
        else:
            env.update(found)
            out.effects.hsa_override = sorted(env_values)[0] if len(env_values) == 1 else None
    env.update(visible_env(ctx.amd.gpus, targets))
    if env:
        out.effects.env = env
    if any(g.integrated for g in targets):
        out.effects.integrated = True
    others = ctx.amd.others
    if others and out.value is not False:
        out.warnings.append(
            "also visible to ROCm: "
            + ", ".join(f"{g.name} ({g.gfx})" for g in others)
            + "; ROCR_VISIBLE_DEVICES in the environment keeps only "
            + ", ".join(str(g.name) for g in targets)
        )
    return out


def override_env(gpus: Sequence[AmdGpu], targets: Sequence[AmdGpu],
                 per_gpu: Dict[int, str]) -> Tuple[Optional[Dict[str, str]], str]:
    """The override variables for the GPUs that need one. ROCm's thunk reads
    HSA_OVERRIDE_GFX_VERSION_<node> (the KFD node, rocminfo's `Node:`) before HSA_OVERRIDE_GFX_VERSION
    (ROCR-Runtime libhsakmt/src/topology.c): one value for every GPU when that is right, else one
    variable per node. None (with the reason) when the values differ and a node number is unknown."""
    values = set(per_gpu.values())
    others = [g for g in gpus if g.index not in per_gpu]
    if len(values) == 1 and not others:
        return {"HSA_OVERRIDE_GFX_VERSION": values.pop()}, ""
    nodes = {i: next((g.node for g in gpus if g.index == i), None) for i in per_gpu}
    if all(isinstance(n, int) for n in nodes.values()):
        return {f"HSA_OVERRIDE_GFX_VERSION_{nodes[i]}": v for i, v in sorted(per_gpu.items())}, ""
    # Without node numbers one global value is right only when every GPU it would rename that does
    # not need it is hidden anyway (an iGPU left out by visible_env).
    target_ids = {g.index for g in targets}
    if len(values) == 1 and not any(g.index in target_ids for g in others):
        return {"HSA_OVERRIDE_GFX_VERSION": values.pop()}, ""
    return None, ("the AMD GPUs need different HSA_OVERRIDE_GFX_VERSION values (one for each, or none for "
                  "some) and the capture does not give their KFD node numbers (for "
                  "HSA_OVERRIDE_GFX_VERSION_<node>); run one at a time")


def visible_env(gpus: Sequence[AmdGpu], targets: Sequence[AmdGpu]) -> Dict[str, str]:
    """On a machine with an integrated and a discrete AMD GPU, the runtime sees both, and a framework
    built for the discrete card's target then trips over the iGPU (no kernels for it, or device 0 is
    the iGPU). ROCR_VISIBLE_DEVICES (indices or UUIDs, read by the ROCm runtime) keeps only the
    targets; HIP_VISIBLE_DEVICES then numbers what is left 0..n-1. Nothing when every GPU is a target."""
    if not gpus or len(targets) >= len(gpus):
        return {}
    ids = []
    for g in targets:
        uuid = g.uuid or ""
        ids.append(uuid if re.fullmatch(r"GPU-[0-9a-fA-F]{16}", uuid) else str(g.index))
    return {"ROCR_VISIBLE_DEVICES": ",".join(ids), "HIP_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(ids)))}


def _amd_target_rows(kb: Knowledge) -> Dict[str, Row]:
    return {str(r.get("gfx")): r for r in kb.rows("amd_wheels", "targets") if r.get("gfx")}


_AMD_STATUS_WORDS = {"release-ready": "Release Ready", "sanity-tested": "Sanity Tested",
                     "build-passing": "Build Passing only"}


@test("amd_native_target")
def _amd_native_target(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """AMD's own wheels carry native kernels for the target GPU (knowledge/amd_wheels.json): no
    override. The device extra goes into the install (`effects.amd_device_extra`); a target AMD
    marks only Build Passing on this OS fits as unverified (AMD: pip install works, the runtime may not)."""
    targets = ctx.amd.targets
    if not targets:
        return Outcome(False, reasons=["no AMD GPU was found"])
    if ctx.os.wsl:
        return Outcome(False, reasons=[
            "AMD does not yet document its pip wheels inside WSL2 (TheRock's RELEASES.md keeps the WSL "
            "section commented out); PyTorch's ROCm wheels with AMD's WSL runtime are the WSL2 path"])
    system = ctx.os.system
    rows = _amd_target_rows(kb)
    out = Outcome(True)
    extras: List[str] = []
    for gpu in targets:
        gfx, name = gpu.gfx, gpu.name or "the AMD GPU"
        if not gfx:
            out.value = False
            out.reasons.append(f"the gfx target of {name} is unknown, so AMD's wheel for it cannot be chosen")
            continue
        r = rows.get(gfx)
        status = r.row("status").get(system) if r is not None and system else None
        if r is None or not r.get("extra"):
            out.value = False
            note = f" ({r.get('note')})" if r and r.get("note") else ""
            out.reasons.append(f"AMD's wheels have no device package for {gfx} ({name}){note}")
            continue
        if system is None:
            out.value = None if out.value is not False else False
            out.unknown.append(f"the OS is unknown; AMD lists {gfx} per OS (Linux, Windows)")
        elif status is None:
            out.value = False
            listed = ", ".join(sorted(r.row("status").keys())) or "no OS"
            out.reasons.append(f"AMD builds no {system} wheels for {gfx} ({name}); it lists {listed}")
            continue
        elif status == "build-passing":
            out.effects.unofficial = True
            out.warnings.append(
                f"AMD marks {gfx} ({name}) on {system} Build Passing only: pip install works, but AMD has not "
                "tested the runtime on it (device enumeration, kernel launch or library loads may fail)")
        if r.get("caveat"):
            out.warnings.append(f"{gfx}: {r.get('caveat')}")
        runtime = gpu.runtime_gfx
        if runtime and runtime != gfx:
            out.warnings.append(
                f"the scan shows HSA_OVERRIDE_GFX_VERSION in effect ({name} runs as {runtime}): unset it "
                f"for these wheels, which carry {gfx}'s own kernels and none for {runtime}")
        extras.append(str(r.get("extra")))
    if out.value is not False:
        out.effects.amd_device_extra = ",".join(dict.fromkeys(extras))
        env = visible_env(ctx.amd.gpus, targets)
        if env:
            out.effects.env = env
        if any(g.integrated for g in targets):
            out.effects.integrated = True
        others = ctx.amd.others
        if others:
            out.warnings.append(
                "also visible to ROCm: " + ", ".join(f"{g.name} ({g.gfx})" for g in others)
                + "; ROCR_VISIBLE_DEVICES in the environment keeps only "
                + ", ".join(str(g.name) for g in targets))
    return out


@test("rocm_wsl_ok")
def _rocm_wsl_ok(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    if not ctx.os.wsl:
        return Outcome(True)
    families = kb.rows("rocm", "wsl_gfx_families")
    out = Outcome(
        True,
        warnings=[
            "ROCm inside WSL2 goes through AMD's WSL support in the Windows Adrenalin "
            "driver (official from 24.12.1) with AMD's WSL runtime"
        ],
    )
    for gpu in ctx.amd.targets:
        gfx = gpu.gfx or ""
        if not any(gfx.startswith(f.text("prefix") or "") for f in families):
            out.value = False
            names = ", ".join(f"{f.get('prefix')}x ({f.get('family')})" for f in families)
            out.reasons.append(
                f"ROCm in WSL2 exposes only {names} GPUs; {gpu.name} is {gfx or 'unknown'} "
                "(AMD: RDNA2 and older are not supported under WSL, and hang)"
            )
    return out


@test("windows_build_ok")
def _windows_build_ok(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    native, wsl = int(cond.integer("native_min") or 0), int(cond.integer("wsl_min") or 0)
    what = cond.text("what", "this package")
    build = ctx.os.windows_build
    if ctx.os.wsl:
        if build is None:
            return Outcome(
                None,
                unknown=[
                    f"{what} in WSL2 needs Windows build >= {wsl}; the Windows build is not "
                    "visible from inside WSL"
                ],
            )
        return Outcome(
            build >= wsl, reasons=[f"{what} in WSL2 needs Windows build >= {wsl}; this is {build}"]
        )
    system = ctx.os.system
    if system == "Windows":
        if build is None:
            return Outcome(None, unknown=[f"{what} needs Windows 10 build >= {native}; the build is unknown"])
        return Outcome(build >= native, reasons=[f"{what} needs Windows build >= {native}; this is {build}"])
    if system is None:
        return Outcome(None, unknown=[f"the OS is unknown; {what} needs Windows (build >= {native}) or WSL2"])
    return Outcome(False, reasons=[f"{what} runs on Windows or in WSL2, not on {system}"])


@test("gpu_vendor_present")
def _gpu_vendor_present(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    vendors = strs(resolve(cond.get("vendors"), ctx, row))
    pool = ctx.metal.gpus  # the GPUs Metal can use: the one pool this test reads
    hits = [g for g in pool if g.vendor in vendors]
    if hits:
        return Outcome(True, effects=Effects(device_name=hits[0].name))
    seen = ", ".join(f"{g.name} ({g.vendor})" for g in pool) or "none"
    words = {"vendors": " or ".join(vendors), "seen": seen}
    return Outcome(False, reasons=[f"needs a {words['vendors']} GPU; Metal GPUs seen: {seen}"], vars=words)


def _xpu_supported(gpu: GpuFacts, kb: Knowledge) -> Optional[bool]:
    pci = (gpu.pci_device_id or "").strip().lower()
    if pci:
        for r in kb.rows("intel_gpus", "rows"):
            if (r.text("pci_device_id", "") or "").lower() == pci:
                return r.flag("xpu_supported")
    name = _name(gpu)
    if not name:
        return None
    for r in kb.rows("intel_gpus", "xpu_supported_names"):
        if re.search(str(r.get("pattern")), name, re.I):
            return True
    return False


_D3D12_VENDORS = ("nvidia", "amd", "intel", "qualcomm")


def _directml_missing(ctx: RulesContext, kb: Knowledge) -> List[str]:
    """Why no GPU can run DirectML, naming the condition that failed: the Windows build (before
    directml.json's oldest windows_min_build, 16299 = Windows 10 1709), a GPU the Windows probe
    judged without DirectX 12 (dxdiag lists no 12_x feature level for it, or it runs on Microsoft's
    Basic Display driver), a GPU in NVIDIA's TCC driver model, or no GPU at all."""
    builds = [r.get("windows_min_build") for r in kb.rows("directml", "packages")]
    ints = [b for b in builds if isinstance(b, int) and not isinstance(b, bool)]
    minimum = min(ints) if ints else 16299
    system, wsl, build = ctx.os.system, ctx.os.wsl, ctx.os.windows_build
    gpus = [g for g in ctx.gpus if g.vendor in _D3D12_VENDORS]
    out: List[str] = []
    if system not in (None, "Windows") and not wsl:
        out.append(f"DirectML runs on Windows (10 1709, build {minimum}, or later) or in WSL2, not on {system}")
    elif not wsl and isinstance(build, int) and build < minimum:
        out.append(f"Windows build {build} is older than {minimum} (Windows 10 1709), the first DirectML runs on")
    else:
        for g in gpus:
            if "windows" not in g.sources:
                if system == "Windows" and g.vendor == "nvidia":
                    # Windows and an NVIDIA GPU the DirectML pool left out: nvidia-smi's TCC driver model.
                    out.append(f"{g.name or 'the NVIDIA GPU'} runs in NVIDIA's TCC driver model, which "
                               "DirectX (and so DirectML) cannot see; switch it to WDDM or MCDM (nvidia-smi -dm)")
            elif not g.name:
                out.append(f"the {g.vendor} GPU runs on Microsoft's Basic Display driver, which offers no "
                           "DirectX 12: install its vendor's driver")
            else:
                out.append(f"{g.name} has no DirectX 12 feature level (12_x) in dxdiag, so no DirectX 12 "
                           "device for DirectML (its driver or the GPU is too old)")
    if not out:
        out.append("no GPU that DirectML can use was found (DirectML needs a DirectX 12 GPU on "
                   "Windows 10 1709+, or WSL2)")
    return out


@test("directml_gpu")
def _directml_gpu(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    gpus = ctx.directml.gpus
    if not gpus:
        return Outcome(False, reasons=_directml_missing(ctx, kb))
    best = sorted(gpus, key=lambda g: (bool(g.integrated), g.vendor == "intel"))[0]
    return Outcome(True, effects=Effects(device_name=_name(best), integrated=bool(best.integrated)))


def _name(gpu: GpuFacts) -> Optional[str]:
    return gpu.name if gpu.name and gpu.name.strip() else None


@test("xpu_gpu_supported")
def _xpu_gpu_supported(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    gpus = ctx.intel.gpus
    if not gpus:
        return Outcome(False, reasons=["no Intel GPU was found"])
    verdicts = [(g, _xpu_supported(g, kb)) for g in gpus]
    good = [g for g, ok in verdicts if ok]
    if good:
        g = sorted(good, key=lambda x: bool(x.integrated))[0]
        return Outcome(True, effects=Effects(integrated=bool(g.integrated), device_name=_name(g)))
    if all(ok is None for _, ok in verdicts):
        return Outcome(
            None, unknown=["the Intel GPU's model is unknown, so XPU support could not be checked"]
        )
    names = ", ".join(str(_name(g)) for g in gpus)
    return Outcome(
        False,
        reasons=[
            f"PyTorch's XPU backend supports Intel Arc A-/B-Series, Core Ultra 'Arc Graphics' "
            f"and Data Center GPU Max; this machine has {names}"
        ],
    )


_PML_VENDORS = (("NVIDIA", "nvidia"), ("Intel", "intel"), ("Advanced Micro Devices", "amd"), ("AMD", "amd"))
# What PlaidML device ids are made of: the device's name lower-cased with spaces as '_', plus '.<n>'.
# Real OpenCL and Metal device names use letters, digits and these marks (`Intel(R) Arc(TM) A770
# Graphics`, `gfx90a:sramecc+:xnack-`, `Intel(R) UHD Graphics 620 [0x5917]`, `llvmpipe (LLVM 15.0.7,
# 256 bits)`, `Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz`); an id with anything else (a quote, `$`, `;`,
# a control character) is no device a driver reports, and is never written into a setting.
PLAIDML_ID = re.compile(r"^[a-z0-9_.,:()\[\]+\-/@]{1,200}$")
PLAIDML_ID_ALPHABET = "letters, digits and _ . , : ( ) [ ] + - / @"


def plaidml_opencl_id(vendor: Optional[str], name: str, kb: Knowledge) -> str:
    rule = next((r for r in kb.rows("plaidml", "device_ids") if r.get("hal") == "opencl"), Row())
    short = vendor or ""
    vendor_map = rule.row("vendor_map")
    for key, value in ([(k, vendor_map.text(k) or "") for k in vendor_map.keys()] if vendor_map else _PML_VENDORS):
        if key.lower() in (vendor or "").lower():
            short = value
            break
    for prefix in rule.texts("strip_prefixes") if "strip_prefixes" in rule else ("Intel(R) ", "AMD "):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return ("opencl " + short + " " + name).strip().lower().replace(" ", "_")


@test("plaidml_device")
def _plaidml_device(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """Pick the device plaidml-setup would offer first, without asking: a discrete GPU, then an integrated
    one, then llvm_cpu.0 (which needs PLAIDML_EXPERIMENTAL=1)."""
    cands: List[Tuple[int, str, bool, str, bool]] = []  # (speed, id, experimental, name, integrated)
    system = ctx.os.system
    defaults = {str(r.get("hal")): r.texts("vendors") for r in kb.rows("plaidml", "default_config_vendors")}
    seen: Dict[str, int] = {}

    def uniq(base: str) -> str:
        n = seen.get(base, 0)
        seen[base] = n + 1
        return f"{base}.{n}"

    if system == "Darwin":
        for g in ctx.metal.gpus:
            if g.inferred:
                continue
            did = uniq("metal " + str(g.name).lower().replace(" ", "_")).replace(" ", "_")
            integ = bool(g.integrated)
            cands.append(
                (
                    20 if integ else 40,
                    did,
                    g.vendor not in defaults.get("metal", ()),
                    str(g.name),
                    integ,
                )
            )
    for d in ctx.opencl.gpu_devices:
        did = uniq(plaidml_opencl_id(d.vendor, str(d.name), kb))
        integ = bool(d.integrated)
        vendor_short = did.split("_")[1] if "_" in did else ""
        cands.append(
            (
                20 if integ else 40,
                did,
                vendor_short not in defaults.get("opencl", ()),
                str(d.name),
                integ,
            )
        )
    fixes = []
    listed_vendors = {c[1].split("_")[1] for c in cands if c[1].startswith("opencl_")}
    for v in kb.rows("opencl_loaders", "vendor_icds"):
        lib = str(v.get("library") or "")
        if lib not in ctx.opencl.unregistered_icds:
            continue
        for gpu in ctx.gpus:
            if gpu.vendor != v.get("gpu_vendor") or not gpu.name or gpu.integrated:
                continue
            # PlaidML's id is made of the OpenCL device's vendor and name; NVIDIA's OpenCL names its
            # devices as nvidia-smi does (NVIDIA H200 -> opencl_nvidia_nvidia_h200.0). The install's
            # device check takes PlaidML's own id for the device once the fix made it visible.
            did = plaidml_opencl_id(str(v.get("opencl_vendor") or gpu.vendor), str(gpu.name), kb)
            short = did.split("_")[1] if "_" in did else ""
            if short in listed_vendors:
                continue
            cands.append((40, uniq(did), short not in defaults.get("opencl", ()), str(gpu.name), False))
            fixes.append((lib, str(v.get("icd_file") or ""), str(gpu.name)))
    left_out = [c for c in cands if not PLAIDML_ID.match(c[1])]
    cands = [c for c in cands if PLAIDML_ID.match(c[1])]
    cands.append((5, "llvm_cpu.0", True, "the CPU through LLVM", False))
    cands.sort(key=lambda c: -c[0])
    speed, did, experimental, name, integ = cands[0]
    out = Outcome(
        True,
        effects=Effects(
            device_id=did,
            device_name=name,
            experimental=experimental,
            speed=speed,
            integrated=integ,
            env={
                "PLAIDML_DEVICE_IDS": did,
                "PLAIDML_EXPERIMENTAL": "1" if experimental else "0",
                "KERAS_BACKEND": "plaidml.keras.backend",
            },
        ),
    )
    for c in left_out:
        out.warnings.append(
            f"the device {c[3]!r} is left out: its PlaidML id {c[1]!r} holds characters no PlaidML "
            f"device id is made of ({PLAIDML_ID_ALPHABET}); if it is real, choose it with plaidml-setup"
        )
    for lib, icd, gname in fixes:
        if any(c[1] == did and c[3] == gname for c in cands[:1]):
            out.warnings.append(
                f"register {gname}'s OpenCL driver: no ICD entry names {lib} (installed, in the loader cache), so "
                f"no OpenCL loader lists the GPU; the install writes a vendors folder into the environment (the "
                f"system's .icd files and {icd} naming {lib}) and sets OCL_ICD_VENDORS to it at every start "
                f"(start-up hook and activate scripts); its device check then names PlaidML's own id for the GPU"
            )
    if did == "llvm_cpu.0":
        if ctx.opencl.known is False and ctx.gpus:
            out.warnings.append(
                "the capture lists no OpenCL devices, so PlaidML falls back to llvm_cpu.0; "
                "install the GPU's OpenCL driver (and clinfo) to use the GPU"
            )
        out.warnings.append(
            "PlaidML runs on the CPU here (llvm_cpu.0, experimental): expect it to be slower than "
            "TensorFlow or PyTorch on the same CPU"
        )
    elif experimental:
        out.warnings.append(f"{did} is one of PlaidML's experimental devices (PLAIDML_EXPERIMENTAL=1)")
    return out


@test("arch_has_build")
def _arch_has_build(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """Does `framework` publish installable builds for this CPU architecture (cpu_archs.json
    `frameworks` rows)? A row with pip false says, in words, what exists instead (conda-forge, a
    source build)."""
    framework = str(cond.get("framework"))
    arch = ctx.cpu.arch
    name = cond.text("name", framework)
    if not arch:
        text = cond.text("unknown") or f"the CPU architecture is unknown; {name} has x86_64 and ARM64 wheels"
        return Outcome(None, unknown=[text])
    rows = kb.rows("cpu_archs", "frameworks")
    hit = next((r for r in rows if r.get("framework") == framework and arch in r.texts("arch")), None)
    if hit is None:
        return Outcome(False, reasons=[f"{name} publishes no build for {arch}"])
    if hit.get("pip"):
        return Outcome(True)
    return Outcome(False, reasons=[(hit.text("how", "") or "").replace("{arch}", str(arch))])

