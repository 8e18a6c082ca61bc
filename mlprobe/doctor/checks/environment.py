"""Doctor checks: where Python runs (containers without the GPU passed in, WSL without its GPU bridge or
with a Linux NVIDIA driver installed, macOS floors for MPS, Rosetta, macOS version compatibility)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import List, Optional

from ...model.doctor import Evidence
from ...model.facts import GpuFacts
from ...model.knowledge import Row, rows, version
from ..context import DoctorContext
from ._base import Hit, PLAN_HINT, Result, Unknown, _ev, _run_lines, _version, check
from .amd import _gfx_evidence

# -- containers


@check("container_detected")
def container_detected(dc: DoctorContext, row: Row) -> Result:
    if not dc.containers:
        known = [n for n in ("dockerenv.txt", "proc-1-cgroup.txt") if dc.has(n)]
        if not known and dc.host.kind == "replay":
            return Unknown("the capture has none of the container markers (/.dockerenv, /run/.containerenv, "
                           "/proc/1/cgroup)")
        return []
    return [Hit({"what": dc.container_what()}, [ev for _, ev in dc.containers])]


def _pci_gpus(dc: DoctorContext, vendor: str) -> List[GpuFacts]:
    return [g for g in dc.gpus(vendor) if any(s in ("lspci", "pci", "drm", "sysfs") or "pci" in s or "drm" in s
                                               for s in g.sources)]


@check("container_gpu_not_passed")
def container_gpu_not_passed(dc: DoctorContext, row: Row) -> Result:
    if not dc.containers or dc.wsl[0]:
        return []
    if dc.dev_nodes is None:
        return Unknown("no ls-l-dev.txt in the capture (the device nodes)")
    out = []
    for vendor, nodes, missing in (("nvidia", "/dev/nvidia* device nodes", not dc.nodes(r"/dev/nvidia\d+")),
                                   ("amd", "/dev/kfd", dc.node("/dev/kfd") is None)):
        gpus = _pci_gpus(dc, vendor) or dc.gpus(vendor)
        if not gpus or not missing:
            continue
        lines = _run_lines(dc, vendor)
        out.append(Hit({"what": dc.container_what().replace("a ", "", 1).replace("an ", "", 1),
                        "gpu": dc.gpu_words(gpus), "nodes": nodes, "fix": lines[0]},
                       _ev(dc.gpu_evidence(gpus[0]), Evidence(capture="ls-l-dev.txt", line=f"(no {nodes} entry)"),
                           *(ev for _, ev in dc.containers[:1])),
                       detail="start it again with the GPU: " + " | ".join(lines[1:]) if len(lines) > 1 else None))
    return out


@check("container_nvidia_libraries")
def container_nvidia_libraries(dc: DoctorContext, row: Row) -> Result:
    if not dc.containers or dc.wsl[0] or not dc.nodes(r"/dev/nvidia\d+"):
        return []
    if dc.ldconfig is None:
        return Unknown("no ldconfig-p.txt in the capture")
    if "libcuda.so.1" in dc.ldconfig:
        return []
    node = dc.nodes(r"/dev/nvidia\d+")[0]
    return [Hit({"what": dc.container_what().replace("a ", "", 1).replace("an ", "", 1),
                 "fix": _run_lines(dc, "nvidia")[0] + "  # and NVIDIA_DRIVER_CAPABILITIES=compute,utility"},
                _ev(Evidence(capture="ls-l-dev.txt", line=node.line),
                    Evidence(capture="ldconfig-p.txt", line="(no libcuda.so.1 in the cache)"),
                    dc.env_evidence("NVIDIA_DRIVER_CAPABILITIES") if dc.env("NVIDIA_DRIVER_CAPABILITIES") else None))]


# -- WSL


@check("wsl_detected")
def wsl_detected(dc: DoctorContext, row: Row) -> Result:
    kind, ev = dc.wsl
    return [Hit({"what": kind}, ev)] if kind else []


@check("wsl_no_gpu_bridge")
def wsl_no_gpu_bridge(dc: DoctorContext, row: Row) -> Result:
    kind, ev = dc.wsl
    if kind is None:
        return []
    if kind == "WSL1":
        return [Hit({"problem": "WSL 1 has no GPU access: GPU compute needs WSL 2",
                     "fix": "wsl --set-version DISTRO 2  # in Windows (PowerShell); `wsl -l -v` lists the distributions"},
                    ev)]
    dxg = None
    text = dc.text("wsl-dxg.json")
    if text is not None:
        from ..parse import load_json

        doc = load_json(text)
        if isinstance(doc, dict) and isinstance(doc.get("dev_dxg"), bool):
            dxg = doc["dev_dxg"]
    if dxg is None and dc.dev_nodes is not None and dc.dev_listing_covers("/dev"):
        dxg = dc.node("/dev/dxg") is not None
    if dxg is None:
        return Unknown("neither wsl-dxg.json nor ls-l-dev.txt says whether /dev/dxg exists")
    if dxg:
        return []
    return [Hit({"problem": "WSL2 without /dev/dxg: the GPU is not shared into this distribution",
                 "fix": "wsl --update && wsl --shutdown  # in Windows; GPU compute needs Windows 11 or Windows 10 21H2+ "
                        "and a GPU driver with WSL support"},
                ev + [Evidence(capture="ls-l-dev.txt" if dc.dev_nodes is not None else "wsl-dxg.json",
                               line="(no /dev/dxg)")])]


@check("wsl_linux_nvidia_driver")
def wsl_linux_nvidia_driver(dc: DoctorContext, row: Row) -> Result:
    kind, _ = dc.wsl
    if kind is None:
        return []
    hits: List[Evidence] = []
    for path, line in (dc.ldconfig or {}).get("libcuda.so.1", []):
        if not path.startswith("/usr/lib/wsl/"):
            hits.append(Evidence(capture="ldconfig-p.txt", line=line))
    proc = dc.line("proc-driver-nvidia-version.txt", r"NVRM|Kernel Module")
    if proc:
        hits.append(proc)
    if hits:
        return [Hit({"where": hits[0].line if hits[0].capture != "ldconfig-p.txt" else
                     "libcuda.so.1 in " + hits[0].line.split("=>")[-1].strip()}, hits)]
    smi = dc.line("nvidia-smi.txt", r"couldn't communicate with the NVIDIA driver")
    if smi and dc.ldconfig is None:
        return [Hit({"where": "nvidia-smi inside WSL cannot reach the driver"}, [smi], severity="warning",
                    detail="the usual cause is a Linux driver installed inside WSL; an ldconfig-p.txt capture "
                           "would show it (libcuda.so.1 outside /usr/lib/wsl/lib)")]
    if dc.ldconfig is None and dc.gpus("nvidia"):
        return Unknown("no ldconfig-p.txt in the capture (which libcuda.so.1 the loader finds)")
    return []


@check("wsl_amd_rocm")
def wsl_amd_rocm(dc: DoctorContext, row: Row) -> Result:
    from ...model.knowledge import Row
    from ...plan.conditions import evaluate
    from ...recipes import knowledge

    kind, ev = dc.wsl
    if kind is None or not dc.gpus("amd"):
        return []
    ctx = dc.rules_ctx.but(os=replace(dc.rules_ctx.os, wsl=True))
    out = evaluate(Row({"test": "rocm_wsl_ok"}), ctx, knowledge())
    gpu_ev = _gfx_evidence(dc, next((g.gfx_target for g in dc.gpus("amd") if g.gfx_target), None))
    wsl_line = "amdgpu-install -y --usecase=wsl,rocm --no-dkms  # inside WSL, with AMD's Adrenalin driver on Windows"
    if out.value is False:
        best = dc.best("torch")
        install = dc.install_line("torch") if best and best.recipe != "torch-rocm" else None
        return [Hit({"problem": "; ".join(out.reasons), "fix": install or PLAN_HINT}, _ev(gpu_ev, *ev[:1]))]
    return [Hit({"problem": f"{dc.gpu_words(dc.gpus('amd'))} under WSL2 needs AMD's WSL runtime of ROCm",
                 "fix": wsl_line}, _ev(gpu_ev, *ev[:1]), severity="info",
                detail="; ".join(out.warnings) + "; PyTorch's ROCm wheel then uses the WSL runtime's "
                       "libhsa-runtime64.so in place of the one it bundles (AMD's WSL guide)")]


# -- macOS


@check("mps_macos_floor")
def mps_macos_floor(dc: DoctorContext, row: Row) -> Result:
    from ...plan.conditions import spec_contains

    if dc.system != "Darwin" or "torch" not in dc.frameworks:
        return []
    macos = dc.facts.os.macos_version
    tv = version(_version(dc, "torch").split("+")[0])
    if not macos or tv is None:
        return Unknown("the macOS or torch version is not in the capture")
    for r in rows("doctor", "mps_floors"):
        if spec_contains(str(r["torch"]), tv):
            if version(macos) < version(r["macos"]):  # type: ignore[operator]
                below = str(r["torch"]).lstrip(">=")
                return [Hit({"version": _version(dc, "torch"), "floor": r["macos"], "macos": macos, "below": below},
                            _ev(dc.line("sw_vers.txt", r"ProductVersion"), dc.framework_evidence("torch")))]
            return []
    return []


def _python_platform(dc: DoctorContext) -> "tuple[Optional[str], Optional[str], Optional[Evidence]]":
    """(machine, macOS version) as the Python itself reports them: host.json, else a pasted collect_env's
    `Python platform: macOS-10.16-x86_64-i386-64bit`."""
    info = dc.host.info()
    machine, mac = info.get("machine"), info.get("mac_ver")
    if machine or mac:
        return (str(machine) if machine else None, str(mac) if mac else None,
                Evidence(capture="host.json", line=P_json(dc, "machine" if machine else "mac_ver") or f"machine {machine}"))
    ev = dc.line("collect_env.txt", r"^Python platform:\s*macOS-")
    if ev is None:
        return None, None, None
    m = re.search(r"macOS-(\d+(?:\.\d+)*)-(\w+)", ev.line)
    return (m.group(2), m.group(1), ev) if m else (None, None, ev)


def _real_macos(dc: DoctorContext) -> Optional[Evidence]:
    return dc.line("sw_vers.txt", r"ProductVersion") or dc.line("collect_env.txt", r"^OS:\s*macOS \d")


@check("rosetta_python")
def rosetta_python(dc: DoctorContext, row: Row) -> Result:
    if dc.system != "Darwin":
        return []
    machine, _, machine_ev = _python_platform(dc)
    translated = dc.line("sysctl.txt", r"sysctl\.proc_translated:\s*1")
    apple = dc.line("sysctl.txt", r"machdep\.cpu\.brand_string:\s*Apple") or dc.line("collect_env.txt", r"^Apple M\d")
    cpu = dc.facts.cpu.model or "Apple silicon"
    if machine == "x86_64" and (translated or apple or cpu.startswith("Apple")):
        return [Hit({"cpu": cpu}, _ev(machine_ev, translated or apple))]
    return []


def P_json(dc: DoctorContext, key: str) -> Optional[str]:
    from ..parse import json_line

    return json_line(dc.text("host.json") or "", key)


@check("macos_version_compat")
def macos_version_compat(dc: DoctorContext, row: Row) -> Result:
    if dc.system != "Darwin":
        return []
    _, reported, rep_ev = _python_platform(dc)
    real_ev = _real_macos(dc)
    if not reported or real_ev is None:
        return []
    m = re.search(r"(\d+(?:\.\d+)*)\s*(\(|$)", real_ev.line.split(":", 1)[-1].strip())
    real = m.group(1) if m else real_ev.line.split(":", 1)[-1].strip()
    rv, pv = version(real), version(str(reported))
    if rv is None or pv is None or rv.major == pv.major:
        return []
    if str(reported).startswith("10.16"):
        fix = "export SYSTEM_VERSION_COMPAT=0  # then recreate the environment so pip sees the real version"
    else:
        fix = f"use a Python built with a current macOS SDK (it then reports {real}); recreate the environment with it"
    return [Hit({"reported": reported, "real": real, "fix": fix},
                _ev(rep_ev if rep_ev and "mac" in rep_ev.line.lower() or rep_ev and rep_ev.capture != "host.json"
                    else Evidence(capture="host.json", line=P_json(dc, "mac_ver") or f"mac_ver {reported}"), real_ev),
                detail="pip picks wheels by the version Python reports, and platform checks in frameworks read it too")]
