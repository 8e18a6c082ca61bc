"""Doctor checks: NVIDIA (the driver too old for the CUDA of the build, the card's architecture missing
from the build, a driver branch that dropped the card, /dev/nvidia* nodes)."""

from __future__ import annotations

import re
from typing import List, Optional

from ...model import shell
from ...model.doctor import Evidence
from ...model.facts import GpuFacts
from ...model.knowledge import Row, nvidia_name_row, rows, version
from ..context import DoctorContext
from ._base import Hit, PLAN_HINT, Result, Unknown, _ev, _node_problem, _flavour, _linux_native, _version, check

# -- NVIDIA


def _driver_evidence(dc: DoctorContext) -> Optional[Evidence]:
    return (dc.line("nvidia-smi.txt", r"Driver Version") or dc.line("proc-driver-nvidia-version.txt", r"Kernel Module")
            or dc.line("nvidia-smi-query.csv", r"\d+\.\d+") or dc.line("collect_env.txt", r"^Nvidia driver version"))


def _torch_cuda(dc: DoctorContext) -> Optional[str]:
    fw = dc.frameworks.get("torch")
    seen = dc.seen("torch")
    if seen is not None and isinstance(seen.info.get("cuda"), str):
        return str(seen.info["cuda"])
    if fw is not None and fw.cuda:
        return fw.cuda
    flavour = (fw.flavour if fw is not None else None) or ""
    m = re.fullmatch(r"cu(\d+)(\d)", flavour)
    return f"{m.group(1)}.{m.group(2)}" if m else None


@check("cuda_driver_too_old")
def cuda_driver_too_old(dc: DoctorContext, row: Row) -> Result:
    from ...model.knowledge import Row
    from ...plan.conditions import evaluate
    from ...recipes import knowledge

    flavour = _flavour(dc)
    if not flavour or not flavour.startswith("cu") or not dc.gpus("nvidia"):
        return []
    cuda = _torch_cuda(dc)
    if cuda is None:
        return Unknown("the CUDA version of the torch build is not in the capture")
    ctx = dc.rules_ctx
    if not ctx.nvidia.driver:
        return Unknown("no NVIDIA driver version in the capture")
    out = evaluate(Row({"test": "cuda_driver_runs", "cuda": cuda, "label": f"torch {_version(dc, 'torch')}"}), ctx,
                   knowledge())
    if out.value is not False:
        return [] if out.value else Unknown("; ".join(out.unknown) or "the driver's CUDA ceiling is unknown")
    works = _torch_sees_cuda(dc)
    detail = "; ".join(out.reasons)
    if works:
        detail += ("; yet torch reports CUDA available here, so a CUDA forward-compatibility package (cuda-compat, "
                   "datacenter GPUs only) must be in use: it works, but the next driver-dependent feature may not")
    return [Hit({"driver": ctx.nvidia.driver, "version": _version(dc, "torch"), "cuda": cuda,
                 "install": dc.install_line("torch") or PLAN_HINT},
                _ev(_driver_evidence(dc), dc.framework_evidence("torch"), works), detail=detail,
                severity="warning" if works else None)]


def _torch_sees_cuda(dc: DoctorContext) -> Optional[Evidence]:
    """Evidence that torch itself uses the GPU: its enumeration lists one, or a pasted collect_env says so."""
    seen = dc.seen("torch")
    if seen is not None and any(d.get("kind") == "cuda" for d in seen.devices):
        return Evidence(capture=dc.enumeration.source if dc.enumeration else "framework-devices.json",
                        line=", ".join(str(d.get("id")) for d in seen.devices if d.get("kind") == "cuda"))
    return dc.line("collect_env.txt", r"^Is CUDA available:\s*(True|Yes)")


def _arch_list(dc: DoctorContext) -> "tuple[Optional[List[str]], Optional[Evidence]]":
    """The CUDA architectures of the installed torch: torch.cuda.get_arch_list() when the enumeration
    carries it, else mlprobe's wheel table for that release and index."""
    seen = dc.seen("torch")
    raw = seen.info.get("arch_list") if seen is not None else None
    if isinstance(raw, list) and raw:
        archs = []
        for a in raw:
            m = re.fullmatch(r"(sm|compute)_(\d+)(\d)[af]?", str(a))
            if m:
                archs.append(f"{m.group(2)}.{m.group(3)}" + ("+PTX" if m.group(1) == "compute" else ""))
        return archs, Evidence(capture=dc.enumeration.source if dc.enumeration else "framework-devices.json",
                               line="torch.cuda.get_arch_list(): " + " ".join(str(a) for a in raw))
    flavour = _flavour(dc) or ""
    mm = ".".join(_version(dc, "torch").split("+")[0].split(".")[:2])
    for r in rows("torch_wheels", "cuda"):
        if r.get("torch") == mm and r.get("index") == flavour and isinstance(r.get("archs"), list):
            arm = dc.rules_ctx.cpu.arch == "arm64" and isinstance(r.get("archs_aarch64"), list)
            archs = [str(a) for a in (r["archs_aarch64"] if arm else r["archs"])]
            return archs, Evidence(capture="knowledge/torch_wheels.json",
                                   line=f"torch {mm} {flavour}: archs {', '.join(archs)}",
                                   note=f"source {r.get('source')}")
    return None, None


@check("cuda_arch_missing")
def cuda_arch_missing(dc: DoctorContext, row: Row) -> Result:
    from ...plan.predicates import arch_coverage

    flavour = _flavour(dc)
    if not flavour or not flavour.startswith("cu"):
        return []
    gpus = dc.rules_ctx.nvidia.gpus
    if not gpus:
        return []
    archs, archs_ev = _arch_list(dc)
    if archs is None:
        return Unknown(f"neither the enumeration nor mlprobe's wheel table has the arch list of torch "
                       f"{_version(dc, 'torch')} ({flavour})")
    out = []
    for g in gpus:
        cc = g.cc
        if not cc or arch_coverage(archs, cc) is not None:
            continue
        shown = ", ".join("sm_" + a.replace(".", "").replace("+PTX", "") + ("+PTX" if "+PTX" in a else "")
                          for a in archs)
        ev = dc.line("nvidia-smi-query.csv", re.escape(str(g.name or "")) + r".*" + re.escape(cc)) \
            or dc.gpu_evidence(GpuFacts(vendor="nvidia", name=g.name))
        out.append(Hit({"version": _version(dc, "torch"), "gpu": g.name or "the NVIDIA GPU",
                        "sm": "sm_" + cc.replace(".", ""), "archs": shown, "install": dc.install_line("torch")
                        or PLAN_HINT}, _ev(ev, archs_ev, dc.framework_evidence("torch"))))
    return out


def _driver_major(dc: DoctorContext) -> "tuple[Optional[str], Optional[int]]":
    driver = dc.rules_ctx.nvidia.driver
    if not driver:
        text = dc.text("proc-driver-nvidia-version.txt") or ""
        m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
        driver = m.group(1) if m else None
    v = version(driver)
    return (str(driver) if driver else None), (v.major if v is not None else None)


@check("driver_branch_drops_card")
def driver_branch_drops_card(dc: DoctorContext, row: Row) -> Result:
    nv = dc.gpus("nvidia")
    if not nv or dc.system not in ("Linux", "Windows"):
        return []
    driver, major = _driver_major(dc)
    if major is None:
        return Unknown("no NVIDIA driver version in the capture")
    names = rows("nvidia_gpus", "compute_capability_by_name")
    out = []
    for branch in rows("doctor", "driver_branches"):
        if major < int(branch["from_branch"]):
            continue
        below = version(branch["below_cc"])
        for g in nv:
            cc = g.compute_capability or (nvidia_name_row(names, g.name) or {}).get("compute_capability")
            if not cc or version(cc) is None or below is None or version(cc) >= below:  # type: ignore[operator]
                continue
            arch = (branch.get("architectures") or {}).get(str(cc).split(".")[0], "an older architecture")
            out.append(Hit({"driver": driver, "branch": f"R{major}", "gpu": g.name or "the NVIDIA GPU",
                            "architecture": arch, "cc": cc, "legacy": branch["legacy_branch"]},
                           _ev(_driver_evidence(dc), dc.gpu_evidence(g))))
    return out


@check("nvidia_device_nodes")
def nvidia_device_nodes(dc: DoctorContext, row: Row) -> Result:
    nv = dc.gpus("nvidia")
    if not nv or not _linux_native(dc):
        return []
    if dc.dev_nodes is None:
        return Unknown("no ls-l-dev.txt in the capture (the device nodes)")
    if dc.containers and not dc.nodes(r"/dev/nvidia\d+"):
        return []  # container-gpu-not-passed says it, with the run line
    out = []
    ctl = _node_problem(dc.node("/dev/nvidiactl"), "/dev/nvidiactl", dc)
    gpu_nodes = dc.nodes(r"/dev/nvidia\d+")
    if not gpu_nodes:
        out.append(Hit({"problem": "no /dev/nvidia0: the NVIDIA kernel driver has not created the GPU's device node",
                        "fix": "sudo modprobe nvidia && sudo nvidia-modprobe -u -c=0  # then `dmesg | grep -i nvrm` for why it fails"},
                       _ev(dc.line("ls-l-dev.txt", r"nvidia") or Evidence(capture="ls-l-dev.txt", line="(no nvidia* entry)"),
                           dc.gpu_evidence(nv[0]))))
    for node in gpu_nodes[:1] + ([dc.node("/dev/nvidiactl")] if ctl else []):
        if node is None:
            continue
        why = _node_problem(node, node.path, dc)
        if why:
            out.append(Hit({"problem": why, "fix": f"sudo usermod -a -G {shell.posix([node.group])} \"$LOGNAME\"  # then log in again"},
                           _ev(Evidence(capture="ls-l-dev.txt", line=node.line),
                               Evidence(capture="id.txt", line=dc.identity.line) if dc.identity else None)))
    return out
