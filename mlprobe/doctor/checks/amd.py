"""Doctor checks: AMD and ROCm (a gfx target that needs or mismatches HSA_OVERRIDE_GFX_VERSION, an
unsupported gfx, the iGPU enumerated first, /dev/kfd and /dev/dri nodes)."""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from ...model.doctor import Evidence
from ...model.knowledge import Row, rows
from ..context import DoctorContext
from ._base import Hit, PLAN_HINT, Result, Unknown, _ev, _node_problem, _run_lines, _flavour, _linux_native, _version, check

# -- AMD


def _gfx_evidence(dc: DoctorContext, gfx: Optional[str]) -> Optional[Evidence]:
    if not gfx:
        return None
    return dc.line("rocminfo.txt", rf"^\s*Name:\s+{re.escape(gfx)}\b") or dc.line("collect_env.txt", re.escape(gfx))


# the plan's fix for a target the wheels lack: `export HSA_OVERRIDE_GFX_VERSION=10.3.0`, or the per-GPU
# form `HSA_OVERRIDE_GFX_VERSION_1=10.3.0` when other GPUs must keep their own target
_OVERRIDE_FIX = re.compile(r"HSA_OVERRIDE_GFX_VERSION(_\d+)?=")


@check("rocm_gfx_override_needed")
def rocm_gfx_override_needed(dc: DoctorContext, row: Row) -> Result:
    flavour = _flavour(dc) or ""
    finding = dc.installed("torch")
    if not flavour.startswith("rocm") or not finding or finding.status != "problem":
        return []
    fixes = list(finding.fix)
    fix = next((f for f in fixes if _OVERRIDE_FIX.search(f)), None)
    if not fix:
        return []
    gfx = next((g.gfx for g in dc.rules_ctx.amd.targets if g.gfx), None)
    return [Hit({"version": _version(dc, "torch"), "gpu": dc.gpu_words(dc.gpus("amd")), "gfx": gfx or "?",
                 "override": fix.split("=", 1)[1].strip(), "fix": " && ".join(fixes)},
                _ev(_gfx_evidence(dc, gfx), dc.framework_evidence("torch"), dc.env_evidence("HSA_OVERRIDE_GFX_VERSION")),
                detail="; ".join(finding.reasons) or None)]


@check("rocm_gfx_unsupported")
def rocm_gfx_unsupported(dc: DoctorContext, row: Row) -> Result:
    flavour = _flavour(dc) or ""
    finding = dc.installed("torch")
    if not flavour.startswith("rocm") or not finding or finding.status != "problem" or not dc.gpus("amd"):
        return []
    if any(_OVERRIDE_FIX.search(f) for f in finding.fix):
        return []
    gfx = next((g.gfx for g in dc.rules_ctx.amd.targets if g.gfx), None)
    reason = "; ".join(finding.reasons) or finding.message
    best = dc.best("torch")
    install = dc.install_line("torch") if best and best.recipe != "torch-rocm" else None
    return [Hit({"version": _version(dc, "torch"), "gpu": dc.gpu_words(dc.gpus("amd")), "reason": reason,
                 "install": install or PLAN_HINT}, _ev(_gfx_evidence(dc, gfx), dc.framework_evidence("torch")))]


def _override_gfx(value: str) -> Optional[str]:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value)
    return f"gfx{int(m.group(1))}{int(m.group(2))}{int(m.group(3)):x}" if m else None


@check("hsa_override_mismatch")
def hsa_override_mismatch(dc: DoctorContext, row: Row) -> Result:
    value = dc.env("HSA_OVERRIDE_GFX_VERSION")
    if value is None:
        return []
    as_gfx = _override_gfx(value)
    out = []
    known = {str(r.get("gfx")): r for r in rows("rocm", "overrides")}
    for g in dc.gpus("amd"):
        gfx = g.gfx_target
        if not gfx or g.integrated and len(dc.gpus("amd")) > 1:
            continue
        ev = _ev(dc.env_evidence("HSA_OVERRIDE_GFX_VERSION"), _gfx_evidence(dc, g.runtime_gfx_target or gfx)
                 or dc.gpu_evidence(g))
        if as_gfx is None:
            out.append(Hit({"value": value, "gpu": g.name, "gfx": gfx, "as_gfx": "no",
                            "advice": "it is not a version like 10.3.0, so ROCm ignores it or fails",
                            "fix": f"export HSA_OVERRIDE_GFX_VERSION={known[gfx]['override']}" if gfx in known
                            else "unset HSA_OVERRIDE_GFX_VERSION"}, ev))
            continue
        if as_gfx == gfx:
            continue
        if gfx in known and known[gfx]["override"] != value.strip():
            out.append(Hit({"value": value, "gpu": g.name, "gfx": gfx, "as_gfx": as_gfx,
                            "advice": f"the override known to work for {gfx} is {known[gfx]['override']} "
                                      f"(runs as {known[gfx]['runs_as']})",
                            "fix": f"export HSA_OVERRIDE_GFX_VERSION={known[gfx]['override']}"}, ev))
        elif gfx not in known:
            out.append(Hit({"value": value, "gpu": g.name, "gfx": gfx, "as_gfx": as_gfx,
                            "advice": f"mlprobe knows no override for {gfx}; another target's kernels can crash "
                                      "or compute wrong results",
                            "fix": "unset HSA_OVERRIDE_GFX_VERSION  # unless you know this target needs it"},
                           ev, severity="warning"))
    return out


def _rocminfo_gpus(text: str) -> List[Dict[str, str]]:
    agents = []
    for block in re.split(r"\n\*{4,}\s*\nAgent \d+\s*\n\*{4,}", text):
        fields: Dict[str, str] = {}
        for line in block.splitlines():
            m = re.match(r"^\s{2}(Name|Marketing Name|Device Type):\s+(.*?)\s*$", line)
            if m and m.group(1) not in fields:
                fields[m.group(1)] = m.group(2)
        if fields.get("Device Type") == "GPU":
            agents.append(fields)
    return agents


@check("amd_igpu_first")
def amd_igpu_first(dc: DoctorContext, row: Row) -> Result:
    text = dc.text("rocminfo.txt")
    amd = dc.gpus("amd")
    if text is None or len(amd) < 2:
        return []
    if any(dc.env(v) is not None for v in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")):
        return []
    agents = _rocminfo_gpus(text)
    integrated = {g.gfx_target: bool(g.integrated) for g in amd if g.gfx_target}
    if not agents or not integrated.get(agents[0].get("Name", "")):
        return []
    dgpu = next(((i, a) for i, a in enumerate(agents) if integrated.get(a.get("Name", "")) is False), None)
    if dgpu is None:
        return []
    first = agents[0]
    return [Hit({"igpu": first.get("Marketing Name") or "iGPU", "igfx": first.get("Name"),
                 "dgpu": f"{dgpu[1].get('Marketing Name')} ({dgpu[1].get('Name')})", "index": dgpu[0]},
                _ev(dc.line("rocminfo.txt", rf"Marketing Name:\s+{re.escape(first.get('Marketing Name') or '')}"),
                    dc.line("rocminfo.txt", rf"Marketing Name:\s+{re.escape(dgpu[1].get('Marketing Name') or '')}")),
                detail="torch's cuda:0 (and every program that takes the first GPU) then runs on the iGPU, which "
                       "ROCm may not support and which is much slower")]


@check("amd_device_nodes")
def amd_device_nodes(dc: DoctorContext, row: Row) -> Result:
    amd = dc.gpus("amd")
    kfd_line = dc.line("rocminfo.txt", r"Unable to open /dev/kfd")
    if not (amd or kfd_line) or not _linux_native(dc):
        return []
    out: List[Hit] = []
    in_box = bool(dc.containers) or bool(dc.line("rocminfo.txt", r"Failed to get user name"))
    group_fix = "sudo usermod -a -G render,video $LOGNAME  # then log out and in again"
    box_fix = _run_lines(dc, "amd")[0] + "  # in a container: pass the nodes and both groups" if in_box else None
    if kfd_line:
        reason = kfd_line.line.split(":", 1)[-1].strip()
        if "Permission denied" in reason:
            fix = box_fix or group_fix
        elif "No such file" in reason:
            fix = box_fix or "sudo modprobe amdgpu  # the amdgpu kernel driver creates /dev/kfd; `dmesg | grep -i kfd`"
        else:
            fix = "dmesg | grep -i kfd  # the kernel driver refuses this GPU or this system"
        member = dc.line("rocminfo.txt", r"member of|Failed to get user name")
        out.append(Hit({"problem": f"ROCm cannot open /dev/kfd ({reason})", "fix": fix},
                       _ev(kfd_line, member, Evidence(capture="id.txt", line=dc.identity.line) if dc.identity else None)))
        return out
    if dc.dev_nodes is None:
        return Unknown("no ls-l-dev.txt and no rocminfo complaint in the capture")
    if not amd:
        return []
    if in_box and not dc.node("/dev/kfd"):
        return []  # container-gpu-not-passed gives the run line
    for path, nodes in (("/dev/kfd", [dc.node("/dev/kfd")]), ("/dev/dri/renderD*", dc.nodes(r"/dev/dri/renderD\d+"))):
        present = [n for n in nodes if n is not None]
        if not present:
            if path.startswith("/dev/dri") and not dc.dev_listing_covers("/dev/dri"):
                continue
            out.append(Hit({"problem": f"{path} does not exist: ROCm needs it",
                            "fix": box_fix or "sudo modprobe amdgpu  # then `dmesg | grep -i amdgpu` for why it fails"},
                           _ev(Evidence(capture="ls-l-dev.txt", line=f"(no {path.rsplit('/', 1)[-1]} entry)"),
                               dc.gpu_evidence(amd[0]))))
            continue
        why = _node_problem(present[0], present[0].path, dc)
        if why:
            out.append(Hit({"problem": why, "fix": box_fix or group_fix},
                           _ev(Evidence(capture="ls-l-dev.txt", line=present[0].line),
                               Evidence(capture="id.txt", line=dc.identity.line) if dc.identity else None)))
    return out
