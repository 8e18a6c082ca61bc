"""Named tests about the hardware's own road ahead: NVIDIA driver branches and kernel-module flavours,
DirectML's status and successors, and CPUs whose SIMD flags are unknown. Each reads sourced
knowledge tables (nvidia_gpus.json, torch_wheels.json, directml.json, cpu_families.json) and writes its own sentences. Importing this module registers the
tests in mlprobe.plan.conditions.TESTS (mlprobe.plan.rules imports it)."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from .conditions import Effects, Outcome, test
from .predicates import arch_coverage
from ..model.context import RulesContext
from ..model.facts import GpuFacts
from ..model.knowledge import Knowledge, Row, version


def _branch_row(cc: str, kb: Knowledge) -> Optional[Row]:
    return next((r for r in kb.rows("nvidia_gpus", "driver_branches") if cc in r.texts("compute_capabilities")),
                None)


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def _month(ym: str) -> str:
    """'2028-10' -> 'October 2028'."""
    m = re.fullmatch(r"(\d{4})-(\d{2})", ym)
    return f"{_MONTHS[int(m.group(2)) - 1]} {m.group(1)}" if m and 1 <= int(m.group(2)) <= 12 else ym


def _driver_major(driver: Optional[str]) -> Optional[int]:
    v = version(driver)
    return v.major if v is not None else None


def newest_torch_for(cc: str, kb: Knowledge, system: Optional[str], arch: Optional[str]) -> Optional[Row]:
    """The newest torch_wheels.cuda row with a cubin for this compute capability (rows are newest first)."""
    for r in kb.rows("torch_wheels", "cuda"):
        if system and r.get("os") and system not in r.texts("os"):
            continue
        archs = r.texts("archs_aarch64") if arch == "arm64" and r.get("archs_aarch64") is not None else r.texts("archs")
        if archs and arch_coverage(archs, cc) == "cubin":
            return r
    return None


@test("nvidia_driver_branch")
def _nvidia_driver_branch(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """Cards whose last driver branch has been reached (driver_branches): say which branch is the
    last, what that leaves of PyTorch's wheels, and what PyTorch has announced; a driver from a
    branch that ignores the card cannot drive it."""
    out = Outcome(True)
    driver = ctx.nvidia.driver
    major = _driver_major(driver)
    removals = kb.rows("torch_wheels", "planned_removals")
    for gpu in ctx.nvidia.gpus:
        cc = gpu.cc
        if not cc or gpu.integrated:
            continue  # Tegra GPUs use the L4T driver, not these branches
        b = _branch_row(str(cc), kb)
        if b is None:
            continue
        name = gpu.name or "the NVIDIA GPU"
        sm = "sm_" + str(cc).replace(".", "")
        last, ignored = str(b.get("last_branch")), int(b.integer("ignored_from") or 0)
        if major is not None and major >= ignored:
            out.value = False
            out.reasons.append(
                f"{name} is {b.get('architecture')} ({sm}): NVIDIA drivers R{ignored} and later ignore it, and this "
                f"driver is {driver}; install the R{last} branch (a {last}.xx driver), its last")
            continue
        pattern = b.string("datacenter_name_pattern")
        if b.get("datacenter_until") and pattern and re.search(pattern, gpu.name or "", re.I):
            # NVIDIA's data center driver table ends the branch earlier than the GeForce notice.
            until = (f"R{last} is a Long Term Support Branch of NVIDIA's data center drivers, supported until "
                     f"{_month(str(b.get('datacenter_until')))}")
        else:
            until = f"R{last} gets security updates until {_month(str(b.get('security_updates_until')))}"
        text = (f"{name} is {b.get('architecture')} ({sm}): R{last} is the last NVIDIA driver branch for it "
                f"(R{ignored} and later ignore it; {until}), so stay on a {last}.xx or older driver")
        best = newest_torch_for(str(cc), kb, ctx.os.system, ctx.cpu.arch)
        if best is not None:
            text += (f"; the newest PyTorch build with {sm} kernels is torch {best.get('torch')} {best.get('index')} "
                     f"(CUDA {best.get('cuda')}, which an R{last} driver runs)")
            gone = next((r for r in removals if r.get("index") == best.get("index")), None)
            if gone is not None:
                text += (f"; PyTorch has announced that torch {gone.get('removed_from')} publishes no "
                         f"{gone.get('index')} wheels, so {gone.get('last_torch')} is the last build for this card "
                         "(after it, only a source build)")
        out.warnings.append(text)
    return out


def _kernel_flavour(ctx: RulesContext) -> Optional[str]:
    flavour = ctx.nvidia.kernel_module
    return str(flavour) if flavour in ("open", "proprietary") else None


@test("nvidia_kernel_module_fits")
def _nvidia_kernel_module_fits(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """Blackwell and GH200 need NVIDIA's open kernel modules; pre-Turing GPUs need the proprietary
    ones (kernel_modules). Read from /proc/driver/nvidia/version; unknown without it (said only
    where it matters)."""
    flavour = _kernel_flavour(ctx)
    if ctx.os.system not in (None, "Linux") or ctx.os.wsl:
        return Outcome(True)  # Windows and WSL2 use the Windows driver: no Linux kernel module
    out = Outcome(True)
    for gpu in ctx.nvidia.gpus:
        cc, name = gpu.cc, gpu.name or "the NVIDIA GPU"
        for r in kb.rows("nvidia_gpus", "kernel_modules"):
            hit = (cc and cc in r.texts("compute_capabilities")) or (
                r.get("name_pattern") and re.search(str(r.get("name_pattern")), str(gpu.name or ""), re.I))
            if not hit or gpu.integrated:
                continue
            need = str(r.get("needs"))
            if flavour is None:
                if need == "open":
                    out.warnings.append(
                        f"{name} ({r.get('architecture')}) works only with NVIDIA's open kernel modules (the -open "
                        "driver packages); the capture does not show which flavour is loaded "
                        "(/proc/driver/nvidia/version)")
            elif flavour != need:
                out.value = False
                fix = ("install the open flavour of the driver (the -open packages, e.g. nvidia-driver-580-open) "
                       "and reboot" if need == "open" else
                       "install the proprietary flavour of the driver (R580 or older for this card) and reboot")
                out.reasons.append(
                    f"{name} ({r.get('architecture')}) needs NVIDIA's {need} kernel modules, but the {flavour} ones "
                    f"are loaded (/proc/driver/nvidia/version): {fix}")
            break
    return out


@test("wsl_distro_validated")
def _wsl_distro_validated(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """In WSL2, the distributions a vendor documents its stack on (`table`.`key`: rows of distro_id,
    min_version, validated, source): an older release of a listed distribution is rejected with the
    releases it needs; an unlisted distribution fits with a warning; an unknown one is unknown.
    Outside WSL2 it always fits."""
    if ctx.os.wsl is not True:
        return Outcome(True)
    rows = [r for r in kb.rows(str(cond.get("table")), str(cond.get("key"))) if r.get("distro_id")]
    what = str(cond.get("what") or "this build")
    docs = " or ".join(f"{str(r.get('distro_id')).capitalize()} "
                       f"{'/'.join(r.texts('validated') or (str(r.get('min_version')),))}" for r in rows)
    did, dver = ctx.os.distro_id, ctx.os.distro_version
    if not did:
        return Outcome(None, unknown=[f"the WSL2 distribution is unknown (no os-release in the capture); {what} is "
                                      f"documented in WSL2 on {docs}"])
    here = f"{did.capitalize()} {dver or '(release unknown)'}"
    r = next((r for r in rows if str(r.get("distro_id")).lower() == did.lower()), None)
    if r is None:
        return Outcome(True, warnings=[f"{what} is documented in WSL2 on {docs} only; this WSL2 runs {here}, "
                                       "which its makers have not validated"])
    have, need = version(dver), version(str(r.get("min_version")))
    if have is None or need is None:
        return Outcome(None, unknown=[f"the {did.capitalize()} release of this WSL2 is unknown; {what} is "
                                      f"documented in WSL2 on {docs}"])
    if have < need:
        return Outcome(False, reasons=[
            f"{what} is documented in WSL2 on {docs}; this WSL2 runs {here}: upgrade it (do-release-upgrade) or "
            f"install a {did.capitalize()} {r.get('min_version')} or later distribution in WSL2"])
    return Outcome(True)


@test("rocm_linux_only")
def _rocm_linux_only(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """PyTorch's own ROCm wheels exist for Linux only. On Windows the rejection names the road that
    exists: AMD's own wheels (recipe torch-rocm-amd) for the targets amd_wheels.json lists for Windows,
    else DirectML or WSL2."""
    system = ctx.os.system
    what = str(cond.get("what") or "PyTorch's ROCm wheels")
    if system == "Linux":
        return Outcome(True)
    if system is None:
        return Outcome(None, unknown=[f"the OS is unknown; {what} are Linux-only"])
    text = f"{what} are Linux-only; this is {system}"
    if system == "Windows":
        rows = {str(r.get("gfx")): r for r in kb.rows("amd_wheels", "targets") if r.get("gfx")}
        listed = []
        for g in ctx.amd.targets:
            r = rows.get(str(g.gfx))
            status = r.row("status").get("Windows") if r is not None else None
            if r is not None and r.get("extra") and status:
                words = {"release-ready": "Release Ready", "sanity-tested": "Sanity Tested",
                         "build-passing": "Build Passing only"}.get(str(status), str(status))
                listed.append(f"{g.gfx} ({g.name or 'the AMD GPU'}, {words})")
        if listed:
            text += f": AMD's own wheels (torch-rocm-amd) list {', '.join(listed)} for Windows"
        else:
            text += " (on Windows use torch-directml, or WSL2 with an RDNA3/RDNA4 GPU)"
    return Outcome(False, reasons=[text])


@test("directml_successors")
def _directml_successors(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """DirectML is no longer developed (directml.json `facts`, `successors`): say so, and name the
    successors that exist for this machine's GPUs."""
    vendors = {g.vendor for g in ctx.directml.gpus} | {g.vendor for g in ctx.gpus}
    names = [str(r.get("text")) for r in kb.rows("directml", "successors")
             if r.get("vendor") == "any" or r.get("vendor") in vendors]
    text = "DirectML is no longer developed (Microsoft keeps it in sustained engineering; torch-directml stays at 0.2.5 with torch 2.4.1)"
    if names:
        text += "; the maintained roads for this machine: " + "; ".join(names)
    return Outcome(True, warnings=[text])


# --------------------------------------------------------------------------- CPUs known by name only


def cpu_family(model: Optional[str], kb: Knowledge) -> Optional[Row]:
    """The cpu_families.json row whose pattern matches this model name (first match wins), or None."""
    if not model:
        return None
    text = " ".join(str(model).split())
    for r in kb.rows("cpu_families", "families"):
        pattern = r.get("pattern")
        if isinstance(pattern, str) and isinstance(r.get("avx"), bool) and isinstance(r.get("avx2"), bool):
            try:
                if re.search(pattern, text, re.I):
                    return r
            except re.error:
                continue
    return None


def flags_from_family(model: Optional[str], source: Optional[str], kb: Knowledge) -> Tuple[Optional[List[str]], str]:
    """For an x86-64 CPU whose capture names it but lists no flags: the flags its family settles (AVX,
    and AVX2 with the FMA3 every AVX2 part in the table has) and the sentence the plan shows; (None,
    sentence) when no family row matches, so AVX stays unknown and the plan says so."""
    where = f" (from {source})" if source else ""
    row = cpu_family(model, kb)
    if row is None:
        return None, (f"only the CPU's model name is known{where}: {model}; the capture lists no CPU flags and "
                      "mlprobe's CPU-family table does not settle this model, so whether it has AVX is unknown: "
                      "builds that need AVX (TensorFlow's x86 wheels, jaxlib) are not checked here; a scan on the "
                      "machine itself reads the flags")
    flags = ["avx", "avx2", "fma"] if row.get("avx2") else (["avx"] if row.get("avx") else [])
    has = "AVX and AVX2" if row.get("avx2") else ("AVX but not AVX2" if row.get("avx") else "no AVX")
    ref = kb.table("cpu_families").row("source_key").row(str(row.get("source")))
    cite = str(ref.get("short") or row.get("source"))
    return flags, (f"the capture lists no CPU flags; {model}{where} is {row.get('family')}, which has {has} "
                   f"(knowledge/cpu_families.json, {cite})")


# --------------------------------------------------------------------------- Jetson / Tegra


def _jetson_gpu(ctx: RulesContext) -> Optional[GpuFacts]:
    return next((g for g in ctx.gpus if "jetson" in g.sources), None)


def _name(gpu: GpuFacts) -> Optional[str]:
    return gpu.name if gpu.name and gpu.name.strip() else None


@test("not_jetson_l4t_gpu")
def _not_jetson_l4t_gpu(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """A Jetson's integrated GPU before Thor runs on L4T's own driver: the aarch64 CUDA wheels of PyTorch,
    JAX and TensorFlow are SBSA (server Arm) builds and do not run there. Thor on JetPack 7 is SBSA."""
    gpu = _jetson_gpu(ctx)
    if gpu is None or (ctx.jetson is not None and ctx.jetson.soc == "tegra264"):
        return Outcome(True)
    what = str(cond.get("what") or "these aarch64 CUDA wheels")
    return Outcome(False, reasons=[
        f"{_name(gpu) or 'this Jetson'} is a Jetson integrated GPU on L4T's own driver: {what} are SBSA "
        "(server Arm) builds and do not run on it; use the Jetson builds for its JetPack (PyTorch: torch-jetson)"])


@test("jetson_wheels")
def _jetson_wheels(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """This row of jetson.json `wheels` fits the board's JetPack and SoC; where no row can, say why
    (no_wheels: JetPack 5's single wheel files, JetPack 4's end)."""
    gpu = _jetson_gpu(ctx)
    if gpu is None:
        return Outcome(False, reasons=["no NVIDIA Jetson board was found (/etc/nv_tegra_release, the device tree)"])
    jetpack = ctx.jetson.jetpack if ctx.jetson else None
    soc = ctx.jetson.soc if ctx.jetson else None
    if not jetpack:
        return Outcome(None, unknown=["the JetPack release is unknown (no /etc/nv_tegra_release in the capture); "
                                      "NVIDIA's Jetson wheels are built per JetPack"])
    major = str(jetpack).split(".")[0]
    if row is not None and major == str(row.get("jetpack_major")) and (not soc or soc in row.texts("socs")):
        return Outcome(True, effects=Effects(device_name=_name(gpu)))
    gone = next((r for r in kb.rows("jetson", "no_wheels") if str(r.get("jetpack_major")) == major), None)
    if gone is not None:
        return Outcome(False, reasons=[f"JetPack {jetpack}: {gone.get('text')}"])
    return Outcome(False, reasons=[f"{row.get('label') if row else 'this build'} is for JetPack "
                                   f"{row.get('jetpack_major') if row else '?'}, this board runs JetPack {jetpack}"])


@test("jetson_wheels_board")
def _jetson_wheels_board(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """The recipe's gate: a Jetson board is there."""
    if _jetson_gpu(ctx) is None:
        return Outcome(False, reasons=["no NVIDIA Jetson board was found (/etc/nv_tegra_release, the device tree)"])
    return Outcome(True)


# --------------------------------------------------------------------------- Ascend / CANN


@test("cann_toolkit")
def _cann_toolkit(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """torch-npu runs on the CANN toolkit, which its wheels do not bring. Installed: fits. Not installed
    (npu-smi sees the NPUs, no toolkit record: a container with only the driver mounted): fits, with
    the CANN release that runs on the NPU driver (torch_npu.json `cann_for_driver`) as the step before
    the install; where no release in the table fits the driver, it does not fit, and says why."""
    a = ctx.ascend
    if a.cann_installed:
        return Outcome(True)
    if a.cann_installed is None:
        return Outcome(None, unknown=["whether CANN is installed is unknown: torch-npu needs the CANN toolkit "
                                      "it was built for"])
    driver = next((g.driver_version for g in a.npus if g.driver_version), None) or "unknown"
    if a.cann_target is None:
        why = (f"no CANN toolkit is installed, and no CANN release in mlprobe's table runs on the NPU driver "
               f"{driver}" if a.driver_series else "no CANN toolkit is installed and the NPU driver's version "
               "is unknown")
        return Outcome(False, reasons=[why + ": update the driver (Ascend HDK 24.1 or later), then install the "
                                       "CANN toolkit for it (Huawei's CANN/driver compatibility table), then torch-npu"])
    step = (f"install the CANN toolkit, {a.cann_target} (Ascend-cann-toolkit, with its ops package for this NPU), "
            f"the newest release for NPU driver {driver} with torch-npu builds; then source the toolkit's "
            "set_env.sh (`/usr/local/Ascend/ascend-toolkit/set_env.sh` by default) before Python starts")
    return Outcome(True, effects=Effects(prerequisite=step),
                   warnings=[f"no CANN toolkit is installed: torch-npu needs {a.cann_target} first (see the "
                             "prerequisite step)"])


# --------------------------------------------------------------------------- AMD on Windows


@test("amd_windows_driver")
def _amd_windows_driver(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row]) -> Outcome:
    """AMD asks for the latest Adrenalin driver for its Windows wheels (amd_wheels.json `windows_driver`,
    no numeric minimum published): a driver (dxdiag's or WMI's date) older than the wheels' ROCm release
    cannot have been the latest when they were built, so updating it is the step before the install."""
    if ctx.os.system != "Windows":
        return Outcome(True)
    rocm = row.text("rocm") if row is not None else None
    need = next((r for r in kb.rows("amd_wheels", "windows_driver") if r.text("rocm") == rocm), None)
    if need is None:
        return Outcome(True)
    floor = need.text("not_before") or ""
    dated = [(g.name or "the AMD GPU", g.driver_date) for g in ctx.amd.targets]
    old = [(n, d) for n, d in dated if d and (d < floor[:len(d)] if len(d) == 10 else d < floor[:4])]
    if old:
        name, date = old[0]
        step = (f"update the AMD Adrenalin driver to the latest release (amd.com/support): {name}'s driver is dated {date}, "
                f"older than AMD's ROCm {rocm} wheels ({floor[:7]}), and AMD asks for the latest Adrenalin driver for them "
                "(TheRock RELEASES.md)")
        return Outcome(True, effects=Effects(prerequisite=step),
                       warnings=[f"the Adrenalin driver ({date}) predates AMD's ROCm {rocm} wheels: update it first"])
    unsure = [n for n, d in dated if not d or (len(d) == 4 and d == floor[:4])]
    if unsure:
        return Outcome(None, unknown=[f"the date of {unsure[0]}'s driver is unknown (or only its year); AMD asks for the "
                                      f"latest Adrenalin driver for its ROCm {rocm} wheels (dxdiag's Driver Date says it)"])
    return Outcome(True)
