"""The rules context (model/context.py) derived from the scan's typed Facts: one flat, evidence-based
view (nvidia.*, amd.targets, metal.gpus, directml.gpus, opencl.gpu_devices, ...), with the few
inferences a partial capture allows (each one said in `inferred`). Pure: no I/O.

A scan report read from a file becomes Facts at the door (`Facts.from_report`, the lenient reader of
model/contract.py); nothing here checks a type again."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import List, Optional, Tuple

from ..model.context import (AmdGpu, AmdView, AscendView, BusGpu, Count, CpuView, DirectMlView, GpuGroup, MetalGpu,
                             MetalView, NvidiaGpu, NvidiaView, OpenClDeviceView, OpenClView, PythonTarget,
                             RulesContext, UsbView)
from ..model.facts import CannRuntime, CpuFacts, CudaRuntime, Facts, GpuFacts, OpenClRuntime, OsFacts, PythonFacts
from ..model.hw.nvidia import compute_capability_for
from ..model.knowledge import Knowledge, Row

_CC = re.compile(r"\d+\.\d+")
_GFX = re.compile(r"gfx[0-9a-f]+")


def _norm_arch(arch: Optional[str]) -> Optional[str]:
    if not arch:
        return None
    a = arch.lower()
    if a in ("x86_64", "amd64", "x64", "i686-64"):
        return "x86_64"
    if a in ("aarch64", "arm64", "armv8", "arm64e"):
        return "arm64"
    return a


def _major_minor(v: Optional[str]) -> Optional[str]:
    if not v:
        return None
    m = re.match(r"^\s*(\d+)\.(\d+)", str(v))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _text(v: Optional[str], pattern: Optional["re.Pattern[str]"] = None) -> Optional[str]:
    """A text fact as the rules use it: blank is unknown, and so is a value that is not of its form
    (a compute capability is "8.6", a gfx target "gfx1031"), and a value that is not text at all (a
    hand-edited host.json's `"system": 5`)."""
    if not isinstance(v, str) or not v.strip():
        return None
    return v if pattern is None or pattern.fullmatch(v.strip()) else None


def _grace(gpu: GpuFacts, rules: Tuple[Row, ...]) -> bool:
    name = (gpu.name or "").upper()
    return gpu.vendor == "nvidia" and any(
        r.get("when") == "nvidia_name" and re.search(str(r.get("pattern")), name) for r in rules
    )


def _implied(rules: Tuple[Row, ...], kind: str, fact: str, **match: str) -> Optional[str]:
    for r in rules:
        if r.get("when") == kind and all(r.get(k) == v for k, v in match.items()):
            return r.row("implies").text(fact)
    return None


def _host(os_: OsFacts, cpu: CpuFacts, py: PythonFacts, gpus: Tuple[GpuFacts, ...],
          kb: Knowledge) -> Tuple[Optional[str], Optional[str], List[str]]:
    """OS and CPU architecture, inferred from the GPUs when the capture says nothing of them
    (host_inference.json): an Apple GPU means macOS on arm64, a Grace superchip Linux on arm64,
    an Intel/AMD GPU in a Mac x86_64."""
    rules = kb.rows("host_inference", "rules")
    inferred: List[str] = []
    system = _text(os_.system)
    arch = _norm_arch(_text(cpu.arch)) or _norm_arch(_text(py.machine))
    evidence = _text(cpu.arch_evidence)
    if arch and cpu.arch and evidence and evidence != _text(cpu.source) and not evidence.startswith("host.json"):
        # the scan inferred it (a model name, a tool's CPU device, a product on one architecture only)
        inferred.append(f"the CPU is taken to be {arch} ({evidence})")
    vendors = {g.vendor for g in gpus}
    grace = next((g for g in gpus if _grace(g, rules)), None)
    if system is None:
        if "apple" in vendors:
            system = _implied(rules, "gpu_vendor", "os.system", vendor="apple")
            inferred.append("the OS is taken to be macOS (an Apple GPU is listed)")
        elif grace is not None:
            system = "Linux"
            inferred.append("the OS is taken to be Linux (a Grace superchip GPU is listed)")
        elif os_.windows_build is not None or any("directml" in g.apis for g in gpus):
            system = "Windows"
    if arch is None and grace is not None:
        arch = "arm64"
        inferred.append(f"the CPU is taken to be arm64 ({_text(grace.name)} sits on a Grace superchip)")
    jetson = next((g for g in gpus if "jetson" in g.sources), None)
    if arch is None and jetson is not None:
        arch = _implied(rules, "gpu_source", "cpu.arch", source_name="jetson") or "arm64"
        inferred.append(f"the CPU is taken to be arm64 ({_text(jetson.name)} is a Jetson board)")
    arm_gpu = sorted(vendors & {"apple", "arm", "qualcomm"})
    if arch is None and arm_gpu:
        arch = _implied(rules, "gpu_vendor", "cpu.arch", vendor=arm_gpu[0])
        if arch:
            inferred.append(f"the CPU is taken to be arm64 (an {arm_gpu[0].capitalize()} GPU is listed)")
    if arch is None and system == "Darwin" and gpus and "apple" not in vendors:
        arch = _implied(rules, "darwin_non_apple_gpu", "cpu.arch") or "x86_64"
        inferred.append("the CPU is taken to be x86_64 (an Intel Mac: its GPUs are Intel/AMD)")
    return system, arch, inferred


def _driven(g: GpuFacts) -> bool:
    return "nvidia" in g.sources


def _nvidia(gpus: Tuple[GpuFacts, ...], cuda: Optional[CudaRuntime]) -> NvidiaView:
    all_nv = [g for g in gpus if g.vendor == "nvidia"]
    # When the driver (nvidia-smi) answered, CUDA can use what it sees and nothing else: a GPU only
    # lspci lists is not driven (no driver bound, disabled, failed). Without a driver answer, the
    # bus's list is all there is to plan on.
    driven = [g for g in all_nv if _driven(g)]
    undriven = [g for g in all_nv if not _driven(g)] if driven else []
    nv = tuple(
        NvidiaGpu(
            name=_text(g.name),
            cc=_text(g.compute_capability, _CC) or compute_capability_for(_text(g.name)),
            driver=_text(g.driver_version),
            mig=(_text(g.mig_mode) or "").lower() == "enabled",
            integrated=g.integrated,
        )
        for g in all_nv if not driven or _driven(g)
    )
    driver = (_text(cuda.driver_version) if cuda else None) or next((g.driver for g in nv if g.driver), None)
    return NvidiaView(
        count=len(nv),
        gpus=nv,
        driver=driver,
        cuda_version=_major_minor(cuda.version) if cuda else None,
        kernel_module=_text(cuda.kernel_module) if cuda else None,
        mig=any(g.mig for g in nv),
        names=tuple(g.name for g in nv),
        undriven=tuple(BusGpu(name=_text(g.name), pci_bus_id=_text(g.pci_bus_id)) for g in undriven),
    )


def _amd(gpus: Tuple[GpuFacts, ...]) -> AmdView:
    """The discrete AMD GPUs are the target when there are any; integrated ones are `others`."""
    amd = tuple(
        AmdGpu(
            name=_text(g.name),
            gfx=_text(g.gfx_target, _GFX) or _text(g.runtime_gfx_target, _GFX),
            runtime_gfx=_text(g.runtime_gfx_target, _GFX),
            integrated=bool(g.integrated),
            index=i,  # the position among the AMD GPUs: ROCm's device index (ROCR_VISIBLE_DEVICES)
            uuid=_text(g.uuid),
            node=g.kfd_node,
            driver_date=_text(g.driver_date),
        )
        for i, g in enumerate(g for g in gpus if g.vendor == "amd")
    )
    targets = tuple(g for g in amd if not g.integrated) or amd
    return AmdView(
        count=len(amd),
        gpus=amd,
        targets=targets,
        others=tuple(g for g in amd if g not in targets),
        gfx=tuple(g.gfx for g in targets if g.gfx),
    )


def _metal(gpus: Tuple[GpuFacts, ...], system: Optional[str], arch: Optional[str], cpu: CpuFacts,
           inferred: List[str]) -> MetalView:
    metal = [MetalGpu(vendor=g.vendor, name=_text(g.name), integrated=g.integrated)
             for g in gpus if "metal" in g.apis or g.vendor == "apple"]
    model = _text(cpu.model)
    apple_cpu = _text(cpu.vendor) == "apple" or (model or "").startswith("Apple")
    if system == "Darwin" and arch == "arm64" and apple_cpu and not any(g.vendor == "apple" for g in metal):
        metal.append(MetalGpu(vendor="apple", name=f"{model or 'Apple silicon'} GPU", integrated=True, inferred=True))
        inferred.append(
            f"an integrated Apple GPU is assumed ({model} is an Apple silicon chip; the capture lists no GPU)"
        )
    return MetalView(count=len(metal), gpus=tuple(metal))


def _opencl(ocl: Optional[OpenClRuntime], gpus: Tuple[GpuFacts, ...]) -> OpenClView:
    devs = []
    for p in ocl.platforms if ocl else ():
        for d in p.devices:
            integrated = d.host_unified_memory
            if integrated is None and "GPU" in (_text(d.type) or "").upper():
                # integrated: the OpenCL flag, else the GPU entry of the same name
                dn = (_text(d.name) or "").lower()
                match = next((g for g in gpus if _text(g.name) and dn
                              and (str(g.name).lower() in dn or dn in str(g.name).lower())), None)
                integrated = bool(match and match.integrated)
            devs.append(OpenClDeviceView(name=_text(d.name), vendor=_text(d.vendor), type=_text(d.type),
                                         platform=_text(p.name), integrated=integrated))
    gpu_devs = tuple(d for d in devs if "GPU" in (d.type or "").upper())
    return OpenClView(known=ocl is not None, devices=tuple(devs), gpu_devices=gpu_devs, gpu_count=len(gpu_devs),
                      unregistered_icds=tuple(ocl.unregistered_icds or ()) if ocl else ())


def _ascend(gpus: Tuple[GpuFacts, ...], cann: Optional[CannRuntime], kb: Knowledge) -> AscendView:
    """Huawei Ascend NPUs and the CANN toolkit: its version ("8.3.RC2") and series ("8.3"), the part
    torch-npu's builds are matched on. Where npu-smi lists NPUs and no CANN is installed, the target is
    the newest CANN series that runs on the NPU driver (torch_npu.json `cann_for_driver`) and has
    torch-npu builds: the toolkit to install first."""
    npus = tuple(g for g in gpus if g.vendor == "huawei" and "npu" in g.apis)
    version = _text(cann.version) if cann else None
    m = re.match(r"^(\d+)\.(\d+)", version or "")
    series = f"{m.group(1)}.{m.group(2)}" if m else None
    driver = (_text(cann.driver_version) if cann else None) or next(
        (g.driver_version for g in npus if g.driver_version), None)
    d = re.match(r"^(\d+)\.(\d+)", driver or "")
    driver_series = f"{d.group(1)}.{d.group(2)}" if d else None
    target_series, target = (series, f"CANN {version}") if series else (None, None)
    if series is None and cann is not None and cann.installed is False and driver_series:
        built = {r.text("cann_series") for r in kb.rows("torch_npu", "builds")}
        row = next((r for r in kb.rows("torch_npu", "cann_for_driver")
                    if driver_series in r.texts("drivers") and r.text("cann_series") in built), None)
        if row is not None:
            target_series, target = row.text("cann_series"), row.text("cann")
    return AscendView(count=len(npus), npus=npus, cann_installed=cann.installed if cann else None,
                      cann_version=version, cann_series=series, driver_series=driver_series,
                      cann_target_series=target_series, cann_target=target)


def _cpu_flags(cpu: CpuFacts, arch: Optional[str], kb: Knowledge,
               inferred: List[str]) -> Optional[Tuple[str, ...]]:
    flags: Optional[Tuple[str, ...]] = cpu.flags or None
    if flags is None and arch == "x86_64" and (cpu.x86_64_level or 0) >= 3:
        flags = ("avx", "avx2")  # x86-64-v3 implies AVX; v1/v2 say nothing about it
    elif flags is None and arch == "x86_64" and _text(cpu.model):
        # A CPU known by name only (dxdiag, WMI, a pasted brand string): its family may settle AVX.
        from .predicates_hw import flags_from_family

        found, said = flags_from_family(str(cpu.model), _text(cpu.source), kb)
        flags = tuple(found) if found is not None else None
        inferred.append(said)
    return flags


def derive(facts: Facts, kb: Knowledge, python: Optional[str] = None) -> RulesContext:
    """The flat, evidence-based view the conditions read. `python` (X.Y) overrides the target."""
    os_, cpu, py, gpus, rt = facts.os, facts.cpu, facts.python, facts.gpus, facts.runtimes
    system, arch, inferred = _host(os_, cpu, py, gpus, kb)
    flags = _cpu_flags(cpu, arch, kb, inferred)
    target = _major_minor(python) or _major_minor(py.version)  # --python wins
    metal = _metal(gpus, system, arch, cpu, inferred)
    dml = [g for g in gpus if "directml" in g.apis]
    if not dml and (os_.wsl or system == "Windows"):
        # Only GPUs the Windows probe did not judge: where dxdiag or WMI was read, a GPU without
        # "directml" failed its rule (no DirectX 12 feature level or DDI, a Windows build before
        # 1709, no vendor driver) and stays without.
        # A GPU in the TCC driver model (nvidia-smi) is no DirectX device.
        tcc = set(rt.cuda.tcc_gpus) if rt.cuda is not None else set()
        dml = [g for g in gpus if g.vendor in ("nvidia", "amd", "intel", "qualcomm") and "windows" not in g.sources
               and (g.pci_bus_id or g.name) not in tcc]
    usb = facts.usb_accelerators
    kinds = sorted({u.kind or "" for u in usb} - {""})
    if any(u.vendor_id.lower().endswith("03e7") for u in usb) and "movidius-ncs" not in kinds:
        kinds.append("movidius-ncs")
    intel = tuple(g for g in gpus if g.vendor == "intel")
    cuda = rt.cuda
    return RulesContext(
        os=replace(os_, system=system),
        cpu=CpuView(arch=arch, flags=flags, x86_64_level=cpu.x86_64_level, vendor=_text(cpu.vendor),
                    model=_text(cpu.model)),
        python=PythonTarget(version=target, source="--python" if python else ("scan" if target else None),
                            scanned=_text(py.version)),
        gpus=gpus,
        nvidia=_nvidia(gpus, cuda),
        jetson=cuda.jetson if cuda else None,
        amd=_amd(gpus),
        intel=GpuGroup(count=len(intel), gpus=intel),
        ascend=_ascend(gpus, rt.cann, kb),
        apple=Count(count=sum(1 for g in metal.gpus if g.vendor == "apple")),
        metal=metal,
        directml=DirectMlView(count=len(dml), gpus=tuple(dml), discrete=any(not g.integrated for g in dml)),
        opencl=_opencl(rt.opencl, gpus),
        frameworks={f.name: f for f in facts.frameworks if f.name},
        usb=UsbView(count=len(usb), kinds=tuple(kinds), devices=usb),
        inferred=tuple(inferred),
    )


__all__ = ["derive"]
