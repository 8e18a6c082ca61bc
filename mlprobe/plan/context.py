"""The facts the conditions read, derived from a scan report (mlprobe.scan.facts_to_report): one flat,
evidence-based context (nvidia.*, amd.targets, metal.gpus, directml.gpus, opencl.gpu_devices, ...),
with the few inferences a partial capture allows (each one said in `inferred`). Pure: no I/O."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from .conditions import Ctx, Kb
from ..model.knowledge import nvidia_name_row

# --------------------------------------------------------------------------- derived facts


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


def _cc_from_name(name: Optional[str], kb: Kb) -> Optional[str]:
    row = nvidia_name_row((kb.get("nvidia_gpus") or {}).get("compute_capability_by_name", []), name)
    return str(row["compute_capability"]) if row else None


def _s(v: Any, pattern: Optional[str] = None) -> Optional[str]:
    if not isinstance(v, str) or not v.strip():
        return None
    return v if pattern is None or re.fullmatch(pattern, v.strip()) else None


def _i(v: Any) -> Optional[int]:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def _b(v: Any) -> Optional[bool]:
    return v if isinstance(v, bool) else None


def _strs(v: Any) -> List[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, (list, tuple)) else []


def _dicts(v: Any) -> List[Dict[str, Any]]:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, (list, tuple)) else []


def sanitise_report(report: Any) -> Dict[str, Any]:
    """Only the fields the rules read, each of the type the schema gives it (anything else is unknown)."""

    def part(d: Any, key: str) -> Dict[str, Any]:
        v = d.get(key) if isinstance(d, dict) else None
        return v if isinstance(v, dict) else {}

    rep: Dict[str, Any] = report if isinstance(report, dict) else {}
    os_, cpu, py, rt = part(rep, "os"), part(rep, "cpu"), part(rep, "python"), part(rep, "runtimes")
    cuda: Optional[Dict[str, Any]] = part(rt, "cuda") if isinstance(rt.get("cuda"), dict) else None
    ocl: Optional[Dict[str, Any]] = part(rt, "opencl") if isinstance(rt.get("opencl"), dict) else None
    cann: Optional[Dict[str, Any]] = part(rt, "cann") if isinstance(rt.get("cann"), dict) else None
    gpus = []
    for g in _dicts(rep.get("gpus")):
        gpus.append(
            {
                "vendor": (_s(g.get("vendor")) or "unknown").lower(),
                "name": _s(g.get("name")),
                "driver_version": _s(g.get("driver_version")),
                "compute_capability": _s(g.get("compute_capability"), r"\d+\.\d+"),
                "gfx_target": _s(g.get("gfx_target"), r"gfx[0-9a-f]+"),
                "runtime_gfx_target": _s(g.get("runtime_gfx_target"), r"gfx[0-9a-f]+"),
                "integrated": _b(g.get("integrated")),
                "apis": _strs(g.get("apis")),
                "mig_mode": _s(g.get("mig_mode")),
                "pci_device_id": _s(g.get("pci_device_id")),
                "pci_bus_id": _s(g.get("pci_bus_id")),
                "sources": _strs(g.get("sources")),
                "uuid": _s(g.get("uuid")),
                "kfd_node": _i(g.get("kfd_node")),
            }
        )
    platforms = []
    for p in _dicts((ocl or {}).get("platforms")):
        platforms.append(
            {
                "name": _s(p.get("name")),
                "devices": [
                    {
                        "name": _s(d.get("name")),
                        "vendor": _s(d.get("vendor")),
                        "type": _s(d.get("type")),
                        "host_unified_memory": _b(d.get("host_unified_memory")),
                    }
                    for d in _dicts(p.get("devices"))
                ],
            }
        )
    return {
        "os": {
            k: _s(os_.get(k))
            for k in ("system", "release", "macos_version", "distro_id", "distro_version", "glibc")
        }
        | {"wsl": _b(os_.get("wsl")), "windows_build": _i(os_.get("windows_build"))},
        "cpu": {
            "arch": _s(cpu.get("arch")),
            "flags": _strs(cpu.get("flags")),
            "x86_64_level": _i(cpu.get("x86_64_level")),
            "vendor": _s(cpu.get("vendor")),
            "model": _s(cpu.get("model")),
            "source": _s(cpu.get("source")),
        },
        "python": {"version": _s(py.get("version")), "machine": _s(py.get("machine"))},
        "gpus": gpus,
        "runtimes": {
            "cuda": {"version": _s(cuda.get("version")), "driver_version": _s(cuda.get("driver_version")),
                     "kernel_module": _s(cuda.get("kernel_module")),
                     "tcc_gpus": [x for x in cuda.get("tcc_gpus") or () if isinstance(x, str)]
                     if isinstance(cuda.get("tcc_gpus"), list) else [],
                     "jetson": {k: _s(v) for k, v in cuda["jetson"].items() if k in ("l4t", "jetpack", "soc", "module")}
                     if isinstance(cuda.get("jetson"), dict) else None}
            if cuda
            else None,
            "opencl": {"platforms": platforms} if ocl is not None else None,
            "cann": {"version": _s(cann.get("version")), "installed": _b(cann.get("installed"))} if cann else None,
        },
        "frameworks": [
            {k: _s(f.get(k)) for k in ("name", "version", "flavour", "cuda", "hip")}
            for f in _dicts(rep.get("frameworks"))
        ],
        "usb_accelerators": [
            {k: _s(u.get(k)) for k in ("vendor_id", "product_id", "name", "kind")}
            for u in _dicts(rep.get("usb_accelerators"))
        ],
    }


def _grace(gpu: Dict[str, Any], rules: List[Dict[str, Any]]) -> bool:
    name = str(gpu.get("name") or "").upper()
    return gpu.get("vendor") == "nvidia" and any(
        r.get("when") == "nvidia_name" and re.search(r["pattern"], name) for r in rules
    )


def _implied(rules: List[Dict[str, Any]], kind: str, fact: str, **match: Any) -> Optional[str]:
    for r in rules:
        if r.get("when") == kind and all(r.get(k) == v for k, v in match.items()):
            value = (r.get("implies") or {}).get(fact)
            return str(value) if value is not None else None
    return None


def _host(
    os_: Dict[str, Any], cpu: Dict[str, Any], py: Dict[str, Any], gpus: List[Dict[str, Any]], kb: Kb
) -> Tuple[Optional[str], Optional[str], List[str]]:
    """OS and CPU architecture, inferred from the GPUs when the capture says nothing of them
    (host_inference.json): an Apple GPU means macOS on arm64, a Grace superchip Linux on arm64,
    an Intel/AMD GPU in a Mac x86_64."""
    rules = (kb.get("host_inference") or {}).get("rules", [])
    inferred: List[str] = []
    system = os_.get("system")
    arch = _norm_arch(cpu.get("arch")) or _norm_arch(py.get("machine"))
    vendors = {str(g.get("vendor")) for g in gpus}
    grace = next((g for g in gpus if _grace(g, rules)), None)
    if system is None:
        if "apple" in vendors:
            system = _implied(rules, "gpu_vendor", "os.system", vendor="apple")
            inferred.append("the OS is taken to be macOS (an Apple GPU is listed)")
        elif grace is not None:
            system = "Linux"
            inferred.append("the OS is taken to be Linux (a Grace superchip GPU is listed)")
        elif os_.get("windows_build") is not None or any("directml" in g.get("apis", []) for g in gpus):
            system = "Windows"
    if arch is None and grace is not None:
        arch = "arm64"
        inferred.append(f"the CPU is taken to be arm64 ({grace.get('name')} sits on a Grace superchip)")
    jetson = next((g for g in gpus if "jetson" in (g.get("sources") or [])), None)
    if arch is None and jetson is not None:
        arch = _implied(rules, "gpu_source", "cpu.arch", source_name="jetson") or "arm64"
        inferred.append(f"the CPU is taken to be arm64 ({jetson.get('name')} is a Jetson board)")
    arm_gpu = sorted(vendors & {"apple", "arm", "qualcomm"})
    if arch is None and arm_gpu:
        arch = _implied(rules, "gpu_vendor", "cpu.arch", vendor=arm_gpu[0])
        if arch:
            inferred.append(f"the CPU is taken to be arm64 (an {arm_gpu[0].capitalize()} GPU is listed)")
    if arch is None and system == "Darwin" and gpus and "apple" not in vendors:
        arch = _implied(rules, "darwin_non_apple_gpu", "cpu.arch") or "x86_64"
        inferred.append("the CPU is taken to be x86_64 (an Intel Mac: its GPUs are Intel/AMD)")
    return system, arch, inferred


def _driven(g: Dict[str, Any]) -> bool:
    return "nvidia" in (g.get("sources") or [])


def _nvidia(gpus: List[Dict[str, Any]], cuda_rt: Dict[str, Any], kb: Kb) -> Dict[str, Any]:
    nv = []
    all_nv = [g for g in gpus if g.get("vendor") == "nvidia"]
    # When the driver (nvidia-smi) answered, CUDA can use what it sees and nothing else: a GPU only
    # lspci lists is not driven (no driver bound, disabled, failed). Without a driver answer, the
    # bus's list is all there is to plan on.
    driven = [g for g in all_nv if _driven(g)]
    undriven = [g for g in all_nv if not _driven(g)] if driven else []
    for g in all_nv:
        if g.get("vendor") == "nvidia" and (not driven or _driven(g)):
            nv.append(
                {
                    "name": g.get("name"),
                    "cc": g.get("compute_capability") or _cc_from_name(g.get("name"), kb),
                    "driver": g.get("driver_version"),
                    "mig": str(g.get("mig_mode") or "").lower() == "enabled",
                    "integrated": g.get("integrated"),
                }
            )
    driver = cuda_rt.get("driver_version") or next((g["driver"] for g in nv if g["driver"]), None)
    return {
        "count": len(nv),
        "gpus": nv,
        "driver": driver,
        "cuda_version": _major_minor(cuda_rt.get("version")),
        "kernel_module": cuda_rt.get("kernel_module"),
        "mig": any(g["mig"] for g in nv),
        "names": [g["name"] for g in nv],
        "undriven": [{"name": g.get("name"), "pci_bus_id": g.get("pci_bus_id")} for g in undriven],
    }


def _amd(gpus: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The discrete AMD GPUs are the target when there are any; integrated ones are `others`."""
    amd = [
        {
            "name": g.get("name"),
            "gfx": g.get("gfx_target") or g.get("runtime_gfx_target"),
            "runtime_gfx": g.get("runtime_gfx_target"),
            "integrated": bool(g.get("integrated")),
            "index": i,  # the position among the AMD GPUs: ROCm's device index (ROCR_VISIBLE_DEVICES)
            "uuid": g.get("uuid"),
            "node": g.get("kfd_node"),
        }
        for i, g in enumerate(g for g in gpus if g.get("vendor") == "amd")
    ]
    targets = [g for g in amd if not g["integrated"]] or amd
    return {
        "count": len(amd),
        "gpus": amd,
        "targets": targets,
        "others": [g for g in amd if g not in targets],
        "gfx": [g["gfx"] for g in targets if g["gfx"]],
    }


def _metal(
    gpus: List[Dict[str, Any]],
    system: Optional[str],
    arch: Optional[str],
    cpu: Dict[str, Any],
    inferred: List[str],
) -> List[Dict[str, Any]]:
    metal = [g for g in gpus if "metal" in g.get("apis", []) or g.get("vendor") == "apple"]
    apple_cpu = cpu.get("vendor") == "apple" or str(cpu.get("model") or "").startswith("Apple")
    if (
        system == "Darwin"
        and arch == "arm64"
        and apple_cpu
        and not any(g.get("vendor") == "apple" for g in metal)
    ):
        metal.append(
            {
                "vendor": "apple",
                "name": f"{cpu.get('model') or 'Apple silicon'} GPU",
                "integrated": True,
                "inferred": True,
            }
        )
        inferred.append(
            f"an integrated Apple GPU is assumed ({cpu.get('model')} is an Apple silicon chip; the "
            "capture lists no GPU)"
        )
    return metal


def _opencl(ocl: Optional[Dict[str, Any]], gpus: List[Dict[str, Any]]) -> Dict[str, Any]:
    devs = []
    for p in (ocl or {}).get("platforms", []):
        for d in p.get("devices", []):
            hum = d.get("host_unified_memory")
            devs.append(
                {
                    "name": d.get("name"),
                    "vendor": d.get("vendor"),
                    "type": d.get("type"),
                    "platform": p.get("name"),
                    "integrated": bool(hum) if hum is not None else None,
                }
            )
    gpu_devs = [d for d in devs if "GPU" in str(d.get("type") or "").upper()]
    for d in gpu_devs:  # integrated: the OpenCL flag, else the GPU entry of the same name
        if d["integrated"] is None:
            dn = str(d.get("name") or "").lower()
            match = next(
                (
                    g
                    for g in gpus
                    if g.get("name") and dn and (str(g["name"]).lower() in dn or dn in str(g["name"]).lower())
                ),
                None,
            )
            d["integrated"] = bool(match and match.get("integrated"))
    return {"known": ocl is not None, "devices": devs, "gpu_devices": gpu_devs, "gpu_count": len(gpu_devs)}


def _ascend(gpus: List[Dict[str, Any]], cann: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Huawei Ascend NPUs and the CANN toolkit: its version ("8.3.RC2") and series ("8.3"), the part
    torch-npu's builds are matched on."""
    npus = [g for g in gpus if g.get("vendor") == "huawei" and "npu" in g.get("apis", [])]
    version = (cann or {}).get("version")
    m = re.match(r"^(\d+)\.(\d+)", version or "")
    return {"count": len(npus), "npus": npus, "cann_installed": (cann or {}).get("installed"), "cann_version": version,
            "cann_series": f"{m.group(1)}.{m.group(2)}" if m else None}


def derive_facts(report: Dict[str, Any], kb: Kb, python: Optional[str] = None) -> Ctx:
    """The flat, evidence-based view the conditions read. `python` (X.Y) overrides the target."""
    report = sanitise_report(report)
    os_, cpu, py, gpus = report["os"], report["cpu"], report["python"], report["gpus"]
    rt = report["runtimes"]
    system, arch, inferred = _host(os_, cpu, py, gpus, kb)
    flags: Optional[List[str]] = list(cpu["flags"]) or None
    if flags is None and arch == "x86_64" and (cpu.get("x86_64_level") or 0) >= 3:
        flags = ["avx", "avx2"]  # x86-64-v3 implies AVX; v1/v2 say nothing about it
    elif flags is None and arch == "x86_64" and cpu.get("model"):
        # A CPU known by name only (dxdiag, WMI, a pasted brand string): its family may settle AVX.
        from .predicates_hw import flags_from_family

        flags, said = flags_from_family(str(cpu["model"]), _s(cpu.get("source")), kb)
        inferred.append(said)
    target = _major_minor(python) or _major_minor(py.get("version"))  # --python wins
    metal = _metal(gpus, system, arch, cpu, inferred)
    dml = [g for g in gpus if "directml" in g.get("apis", [])]
    if not dml and (os_.get("wsl") or system == "Windows"):
        # Only GPUs the Windows probe did not judge: where dxdiag or WMI was read, a GPU without
        # "directml" failed its rule (no DirectX 12 feature level or DDI, a Windows build before
        # 1709, no vendor driver) and stays without.
        # A GPU in the TCC driver model (nvidia-smi) is no DirectX device.
        tcc = set((rt.get("cuda") or {}).get("tcc_gpus") or ())
        dml = [g for g in gpus if g.get("vendor") in ("nvidia", "amd", "intel", "qualcomm")
               and "windows" not in (g.get("sources") or []) and (g.get("pci_bus_id") or g.get("name")) not in tcc]
    usb = report["usb_accelerators"]
    kinds = sorted({str(u.get("kind") or "") for u in usb} - {""})
    if (
        any(str(u.get("vendor_id") or "").lower().endswith("03e7") for u in usb)
        and "movidius-ncs" not in kinds
    ):
        kinds.append("movidius-ncs")
    intel = [g for g in gpus if g.get("vendor") == "intel"]
    return {
        "os": dict(os_, system=system),
        "cpu": {
            "arch": arch,
            "flags": flags,
            "x86_64_level": cpu.get("x86_64_level"),
            "vendor": cpu.get("vendor"),
            "model": cpu.get("model"),
        },
        "python": {
            "version": target,
            "source": "--python" if python else ("scan" if target else None),
            "scanned": py.get("version"),
        },
        "gpus": gpus,
        "nvidia": _nvidia(gpus, rt.get("cuda") or {}, kb),
        "jetson": (rt.get("cuda") or {}).get("jetson"),
        "amd": _amd(gpus),
        "intel": {"count": len(intel), "gpus": intel},
        "ascend": _ascend(gpus, rt.get("cann")),
        "apple": {"count": sum(1 for g in metal if g.get("vendor") == "apple")},
        "metal": {"count": len(metal), "gpus": metal},
        "directml": {"count": len(dml), "gpus": dml, "discrete": any(not g.get("integrated") for g in dml)},
        "opencl": _opencl(rt.get("opencl"), gpus),
        "frameworks": {str(f["name"]): f for f in report["frameworks"] if f.get("name")},
        "usb": {"count": len(usb), "kinds": kinds, "devices": usb},
        "inferred": inferred,
    }
