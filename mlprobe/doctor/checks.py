"""The doctor's checks, one function per `test` of knowledge/doctor.json. A check reads the
DoctorContext and returns its hits (the placeholders of the rule's title and fix, and the evidence),
an empty list when the link is sound, or `Unknown` when the captures cannot tell."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Union

from ..model.doctor import Evidence
from ..model.knowledge import nvidia_name_row, rows, version
from .context import DoctorContext
from .parse import DevNode


@dataclass
class Hit:
    params: Dict[str, Any]
    evidence: List[Evidence] = field(default_factory=list)
    severity: Optional[str] = None  # overrides the rule's own
    detail: Optional[str] = None


@dataclass
class Unknown:
    why: str


Result = Union[List[Hit], Unknown]
Check = Callable[[DoctorContext, Dict[str, Any]], Result]
CHECKS: Dict[str, Check] = {}

PLAN_HINT = "mlprobe plan  # the builds that fit this machine, with their install commands"


def check(name: str) -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn
    return deco


def _ev(*items: Optional[Evidence]) -> List[Evidence]:
    return [e for e in items if e is not None]


def _flavour(dc: DoctorContext, name: str = "torch") -> Optional[str]:
    fw = dc.frameworks.get(name)
    return str(fw.get("flavour")) if fw and fw.get("flavour") else None


def _version(dc: DoctorContext, name: str) -> str:
    fw = dc.frameworks.get(name) or {}
    return str(fw.get("version") or "?")


def _linux_native(dc: DoctorContext) -> bool:
    return dc.system == "Linux" and dc.wsl[0] is None


def _seen_reason(dc: DoctorContext, name: str) -> Optional[Evidence]:
    seen = dc.seen(name)
    if seen is None:
        return None
    for u in seen.unavailable:
        if u.get("reason"):
            return Evidence(capture=dc.enumeration.source if dc.enumeration else "framework-devices.json",
                            line=str(u["reason"]))
    return None


# -- the build -----------------------------------------------------------------------------------


@check("torch_cpu_build")
def torch_cpu_build(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    flavour = _flavour(dc)
    if "torch" not in dc.frameworks:
        return []
    if flavour is None:
        return Unknown("the capture does not say which build torch is (CPU, CUDA, ROCm)")
    if flavour != "cpu" or dc.system == "Darwin":
        return []
    finding = dc.installed("torch")
    best = dc.best("torch")
    if not finding or finding.get("status") != "problem" or not best:
        return []
    vendor = {"cuda": "nvidia", "rocm": "amd", "xpu": "intel"}.get(str(best.get("backend")), "")
    gpus = dc.gpus(vendor)
    return [Hit({"version": _version(dc, "torch"), "gpu": dc.gpu_words(gpus), "recipe": best["recipe"],
                 "install": dc.install_line("torch")},
                _ev(dc.framework_evidence("torch"), *(dc.gpu_evidence(g) for g in gpus[:1]),
                    _seen_reason(dc, "torch")))]


@check("torch_wrong_vendor")
def torch_wrong_vendor(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    flavour = _flavour(dc)
    if flavour is None or dc.system == "Darwin":
        return []
    nv, amd = dc.gpus("nvidia"), dc.gpus("amd")
    if flavour.startswith("cu") and not nv and amd:
        built, gpus = "CUDA", amd
    elif flavour.startswith("rocm") and not amd and nv:
        built, gpus = "ROCm", nv
    else:
        return []
    return [Hit({"version": _version(dc, "torch"), "built": built,
                 "gpu": f"this machine's GPU is {dc.gpu_words(gpus)}",
                 "install": dc.install_line("torch") or PLAN_HINT},
                _ev(dc.framework_evidence("torch"), dc.gpu_evidence(gpus[0])))]


JAX_PLUGINS = {"nvidia": ("jax-cuda12-plugin", "jax-cuda13-plugin"), "amd": ("jax-rocm60-plugin", "jax-rocm7-plugin")}


@check("jax_no_gpu_plugin")
def jax_no_gpu_plugin(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    if "jax" not in dc.frameworks or dc.system != "Linux":
        return []
    seen = dc.seen("jax")
    plugins = set(seen.info.get("plugins") or {}) if seen and isinstance(seen.info.get("plugins"), dict) else set()
    out = []
    for vendor, names in JAX_PLUGINS.items():
        gpus = dc.gpus(vendor)
        if not gpus or any(n in dc.frameworks or n in plugins for n in names):
            continue
        best = dc.best("jax")
        if not best:
            continue
        out.append(Hit({"version": _version(dc, "jax"), "gpu": dc.gpu_words(gpus), "install": dc.install_line("jax")},
                       _ev(dc.framework_evidence("jax"), dc.gpu_evidence(gpus[0]), _seen_reason(dc, "jax"))))
    return out


@check("tensorflow_no_gpu")
def tensorflow_no_gpu(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    nv = dc.gpus("nvidia")
    if not nv or dc.system != "Linux":
        return []
    best = dc.best("tensorflow")
    for name in ("tensorflow-cpu", "tensorflow", "tensorflow-intel"):
        if name not in dc.frameworks:
            continue
        seen = dc.seen("tensorflow")
        no_cuda = name == "tensorflow-cpu" or (seen is not None and seen.info.get("built_with_cuda") is False)
        if no_cuda and best and best.get("backend") == "cuda":
            ev = None
            if seen is not None and seen.info.get("built_with_cuda") is False:
                ev = Evidence(capture=dc.enumeration.source if dc.enumeration else "framework-devices.json",
                              line="tf.test.is_built_with_cuda() is False")
            return [Hit({"package": name, "version": _version(dc, name), "gpu": dc.gpu_words(nv),
                         "install": dc.install_line("tensorflow")},
                        _ev(dc.framework_evidence(name), dc.gpu_evidence(nv[0]), ev))]
        return []
    return []


@check("build_swapped")
def build_swapped(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    flavour = _flavour(dc)
    best = dc.best("torch")
    finding = dc.installed("torch")
    if not flavour or not best or not best.get("index") or not re.match(r"^(cu|rocm)", flavour):
        return []
    if not finding or finding.get("status") != "ok" or flavour == best["index"]:
        return []
    mm = ".".join(_version(dc, "torch").split("+")[0].split(".")[:2])
    if mm != ".".join(str(best.get("version") or "").split(".")[:2]):
        return []  # another release: its index choices differ, which is no sign of a swap
    if flavour[:2] != str(best["index"])[:2]:
        return []  # another vendor's build: torch-wrong-vendor says so
    return [Hit({"version": _version(dc, "torch"), "build": flavour, "wanted": best["index"],
                 "index_url": best.get("index_url") or best["index"]},
                _ev(dc.framework_evidence("torch")),
                detail=f"the plan recommends {best['recipe']} from the {best['index']} index; "
                       f"the installed build ({flavour}) fits this machine too, so this is a warning only")]


# -- NVIDIA -----------------------------------------------------------------------------------------


def _driver_evidence(dc: DoctorContext) -> Optional[Evidence]:
    return (dc.line("nvidia-smi.txt", r"Driver Version") or dc.line("proc-driver-nvidia-version.txt", r"Kernel Module")
            or dc.line("nvidia-smi-query.csv", r"\d+\.\d+") or dc.line("collect_env.txt", r"^Nvidia driver version"))


def _torch_cuda(dc: DoctorContext) -> Optional[str]:
    fw = dc.frameworks.get("torch") or {}
    seen = dc.seen("torch")
    if seen is not None and isinstance(seen.info.get("cuda"), str):
        return str(seen.info["cuda"])
    if fw.get("cuda"):
        return str(fw["cuda"])
    flavour = str(fw.get("flavour") or "")
    m = re.fullmatch(r"cu(\d+)(\d)", flavour)
    return f"{m.group(1)}.{m.group(2)}" if m else None


@check("cuda_driver_too_old")
def cuda_driver_too_old(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    from ..plan.conditions import evaluate
    from ..recipes import knowledge

    flavour = _flavour(dc)
    if not flavour or not flavour.startswith("cu") or not dc.gpus("nvidia"):
        return []
    cuda = _torch_cuda(dc)
    if cuda is None:
        return Unknown("the CUDA version of the torch build is not in the capture")
    ctx = dc.rules_ctx
    if not ctx["nvidia"]["driver"]:
        return Unknown("no NVIDIA driver version in the capture")
    out = evaluate({"test": "cuda_driver_runs", "cuda": cuda, "label": f"torch {_version(dc, 'torch')}"}, ctx,
                   knowledge())
    if out.value is not False:
        return [] if out.value else Unknown("; ".join(out.unknown) or "the driver's CUDA ceiling is unknown")
    works = _torch_sees_cuda(dc)
    detail = "; ".join(out.reasons)
    if works:
        detail += ("; yet torch reports CUDA available here, so a CUDA forward-compatibility package (cuda-compat, "
                   "datacenter GPUs only) must be in use: it works, but the next driver-dependent feature may not")
    return [Hit({"driver": ctx["nvidia"]["driver"], "version": _version(dc, "torch"), "cuda": cuda,
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
            arm = dc.rules_ctx["cpu"].get("arch") == "arm64" and isinstance(r.get("archs_aarch64"), list)
            archs = [str(a) for a in (r["archs_aarch64"] if arm else r["archs"])]
            return archs, Evidence(capture="knowledge/torch_wheels.json",
                                   line=f"torch {mm} {flavour}: archs {', '.join(archs)}",
                                   note=f"source {r.get('source')}")
    return None, None


@check("cuda_arch_missing")
def cuda_arch_missing(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    from ..plan.predicates import arch_coverage

    flavour = _flavour(dc)
    if not flavour or not flavour.startswith("cu"):
        return []
    gpus = dc.rules_ctx["nvidia"]["gpus"]
    if not gpus:
        return []
    archs, archs_ev = _arch_list(dc)
    if archs is None:
        return Unknown(f"neither the enumeration nor mlprobe's wheel table has the arch list of torch "
                       f"{_version(dc, 'torch')} ({flavour})")
    out = []
    for g in gpus:
        cc = g.get("cc")
        if not cc or arch_coverage(archs, cc) is not None:
            continue
        shown = ", ".join("sm_" + a.replace(".", "").replace("+PTX", "") + ("+PTX" if "+PTX" in a else "")
                          for a in archs)
        ev = dc.line("nvidia-smi-query.csv", re.escape(str(g.get("name") or "")) + r".*" + re.escape(cc)) \
            or dc.gpu_evidence({"name": g.get("name")})
        out.append(Hit({"version": _version(dc, "torch"), "gpu": g.get("name") or "the NVIDIA GPU",
                        "sm": "sm_" + cc.replace(".", ""), "archs": shown, "install": dc.install_line("torch")
                        or PLAN_HINT}, _ev(ev, archs_ev, dc.framework_evidence("torch"))))
    return out


def _driver_major(dc: DoctorContext) -> "tuple[Optional[str], Optional[int]]":
    driver = dc.rules_ctx["nvidia"]["driver"]
    if not driver:
        text = dc.text("proc-driver-nvidia-version.txt") or ""
        m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
        driver = m.group(1) if m else None
    v = version(driver)
    return (str(driver) if driver else None), (v.major if v is not None else None)


@check("driver_branch_drops_card")
def driver_branch_drops_card(dc: DoctorContext, row: Dict[str, Any]) -> Result:
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
            cc = g.get("compute_capability") or (nvidia_name_row(names, g.get("name")) or {}).get("compute_capability")
            if not cc or version(cc) is None or below is None or version(cc) >= below:  # type: ignore[operator]
                continue
            arch = (branch.get("architectures") or {}).get(str(cc).split(".")[0], "an older architecture")
            out.append(Hit({"driver": driver, "branch": f"R{major}", "gpu": g.get("name") or "the NVIDIA GPU",
                            "architecture": arch, "cc": cc, "legacy": branch["legacy_branch"]},
                           _ev(_driver_evidence(dc), dc.gpu_evidence(g))))
    return out


def _node_problem(node: Optional[DevNode], path: str, dc: DoctorContext) -> Optional[str]:
    if node is None:
        return f"{path} does not exist"
    who = dc.identity
    if who is None:
        return None
    ok = node.allows(who)
    if ok is False:
        groups = ", ".join(who.group_names() or who.group_ids()) or "none"
        return (f"{path} is {node.kind}{node.mode} {node.owner}:{node.group}, and this user "
                f"({who.user or who.uid}, groups {groups}) may not open it")
    return None


def _run_lines(dc: DoctorContext, vendor: str) -> List[str]:
    lines = [r for r in rows("doctor", "container_gpu_lines") if r.get("vendor") == vendor]
    engine = dc.engine()
    first = [r["line"] for r in lines if r.get("engine") == engine]
    return first + [r["line"] for r in lines if r.get("engine") != engine]


@check("nvidia_device_nodes")
def nvidia_device_nodes(dc: DoctorContext, row: Dict[str, Any]) -> Result:
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
            out.append(Hit({"problem": why, "fix": f"sudo usermod -a -G {node.group} $LOGNAME  # then log in again"},
                           _ev(Evidence(capture="ls-l-dev.txt", line=node.line),
                               Evidence(capture="id.txt", line=dc.identity.line) if dc.identity else None)))
    return out


# -- visibility ----------------------------------------------------------------------------------------


def _visible(value: str, count: int, uuids: List[str]) -> int:
    """How many GPUs a CUDA_VISIBLE_DEVICES-style list leaves visible: the entries up to the first one
    that is not a device (CUDA stops there)."""
    seen = 0
    for item in value.split(","):
        item = item.strip()
        if re.fullmatch(r"\d+", item) and int(item) < count:
            seen += 1
        elif re.match(r"^(GPU|MIG)-", item, re.I) and (not uuids or any(u.lower().startswith(item.lower())
                                                                           for u in uuids)):
            seen += 1
        else:
            break
    return seen


def _visibility(dc: DoctorContext) -> List[Dict[str, Any]]:
    out = []
    for r in rows("doctor", "visibility_variables"):
        value = dc.env(str(r["name"]))
        if value is None:
            continue
        if r.get("container_only") and not dc.containers:
            continue
        for vendor in r.get("vendors") or []:
            gpus = dc.gpus(vendor)
            if not gpus:
                continue
            count = len(gpus)
            if r.get("container_only"):
                visible = 0 if value.strip().lower() in ("", "void", "none") else count
            else:
                uuids = [str(g.get("uuid")) for g in gpus if g.get("uuid") and "<" not in str(g.get("uuid"))]
                visible = _visible(value, count, uuids) if value.strip() else 0
            out.append({"row": r, "value": value, "vendor": vendor, "gpus": gpus, "count": count, "visible": visible})
            break
    return out


@check("visible_devices_hide_all")
def visible_devices_hide_all(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    hits = []
    for v in _visibility(dc):
        if v["visible"] == 0:
            r = v["row"]
            hits.append(Hit({"variable": r["name"], "shown": repr(v["value"]) if not v["value"].strip() else v["value"],
                             "vendor": {"nvidia": "NVIDIA", "amd": "AMD"}[v["vendor"]], "who": r["who"],
                             "all": ",".join(str(i) for i in range(v["count"]))},
                            _ev(dc.env_evidence(r["name"]), dc.gpu_evidence(v["gpus"][0]))))
    return hits


@check("visible_devices_subset")
def visible_devices_subset(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    return [Hit({"variable": v["row"]["name"], "shown": v["value"], "visible": v["visible"], "count": v["count"],
                 "vendor": {"nvidia": "NVIDIA", "amd": "AMD"}[v["vendor"]]}, _ev(dc.env_evidence(v["row"]["name"])))
            for v in _visibility(dc) if 0 < v["visible"] < v["count"]]


@check("jax_platforms_cpu")
def jax_platforms_cpu(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    value = dc.env("JAX_PLATFORMS")
    if value is None or "jax" not in dc.frameworks or not (dc.gpus("nvidia") or dc.gpus("amd")):
        return []
    wanted = {p.strip().lower() for p in value.split(",") if p.strip()}
    if wanted and not wanted & {"cuda", "gpu", "rocm"}:
        return [Hit({"value": value}, _ev(dc.env_evidence("JAX_PLATFORMS")))]
    return []


@check("ld_library_path_system_cuda")
def ld_library_path_system_cuda(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    value = dc.env("LD_LIBRARY_PATH")
    flavour = _flavour(dc) or ""
    if not value or dc.system != "Linux" or not flavour.startswith("cu"):
        return []
    pats = [re.compile(str(r["pattern"])) for r in rows("doctor", "system_cuda_folders")]
    parts = [p for p in value.split(":")]
    bad = [p for p in parts if p and any(rx.search(p) for rx in pats)]
    if not bad:
        return []
    rest = [p for p in parts if p and p not in bad]
    fix = f"export LD_LIBRARY_PATH={':'.join(rest)}" if rest else "unset LD_LIBRARY_PATH"
    return [Hit({"folders": ", ".join(bad), "version": _version(dc, "torch"), "fix": fix},
                _ev(dc.env_evidence("LD_LIBRARY_PATH"), dc.framework_evidence("torch")),
                detail="the dynamic linker reads LD_LIBRARY_PATH before the library path baked into torch, so "
                       "their cuDNN/cuBLAS load instead of the pip-installed ones: `undefined symbol` errors or "
                       "wrong versions at import")]


# -- AMD ----------------------------------------------------------------------------------------------


def _gfx_evidence(dc: DoctorContext, gfx: Optional[str]) -> Optional[Evidence]:
    if not gfx:
        return None
    return dc.line("rocminfo.txt", rf"^\s*Name:\s+{re.escape(gfx)}\b") or dc.line("collect_env.txt", re.escape(gfx))


# the plan's fix for a target the wheels lack: `export HSA_OVERRIDE_GFX_VERSION=10.3.0`, or the per-GPU
# form `HSA_OVERRIDE_GFX_VERSION_1=10.3.0` when other GPUs must keep their own target
_OVERRIDE_FIX = re.compile(r"HSA_OVERRIDE_GFX_VERSION(_\d+)?=")


@check("rocm_gfx_override_needed")
def rocm_gfx_override_needed(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    flavour = _flavour(dc) or ""
    finding = dc.installed("torch")
    if not flavour.startswith("rocm") or not finding or finding.get("status") != "problem":
        return []
    fixes = [str(f) for f in finding.get("fix") or []]
    fix = next((f for f in fixes if _OVERRIDE_FIX.search(f)), None)
    if not fix:
        return []
    targets = dc.rules_ctx["amd"]["targets"]
    gfx = next((g.get("gfx") for g in targets if g.get("gfx")), None)
    return [Hit({"version": _version(dc, "torch"), "gpu": dc.gpu_words(dc.gpus("amd")), "gfx": gfx or "?",
                 "override": fix.split("=", 1)[1].strip(), "fix": " && ".join(fixes)},
                _ev(_gfx_evidence(dc, gfx), dc.framework_evidence("torch"), dc.env_evidence("HSA_OVERRIDE_GFX_VERSION")),
                detail="; ".join(finding.get("reasons") or []) or None)]


@check("rocm_gfx_unsupported")
def rocm_gfx_unsupported(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    flavour = _flavour(dc) or ""
    finding = dc.installed("torch")
    if not flavour.startswith("rocm") or not finding or finding.get("status") != "problem" or not dc.gpus("amd"):
        return []
    if any(_OVERRIDE_FIX.search(str(f)) for f in finding.get("fix") or []):
        return []
    targets = dc.rules_ctx["amd"]["targets"]
    gfx = next((g.get("gfx") for g in targets if g.get("gfx")), None)
    reason = "; ".join(finding.get("reasons") or []) or str(finding.get("message"))
    best = dc.best("torch")
    install = dc.install_line("torch") if best and best.get("recipe") != "torch-rocm" else None
    return [Hit({"version": _version(dc, "torch"), "gpu": dc.gpu_words(dc.gpus("amd")), "reason": reason,
                 "install": install or PLAN_HINT}, _ev(_gfx_evidence(dc, gfx), dc.framework_evidence("torch")))]


def _override_gfx(value: str) -> Optional[str]:
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value)
    return f"gfx{int(m.group(1))}{int(m.group(2))}{int(m.group(3)):x}" if m else None


@check("hsa_override_mismatch")
def hsa_override_mismatch(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    value = dc.env("HSA_OVERRIDE_GFX_VERSION")
    if value is None:
        return []
    as_gfx = _override_gfx(value)
    out = []
    known = {str(r.get("gfx")): r for r in rows("rocm", "overrides")}
    for g in dc.gpus("amd"):
        gfx = g.get("gfx_target")
        if not gfx or g.get("integrated") and len(dc.gpus("amd")) > 1:
            continue
        ev = _ev(dc.env_evidence("HSA_OVERRIDE_GFX_VERSION"), _gfx_evidence(dc, g.get("runtime_gfx_target") or gfx)
                 or dc.gpu_evidence(g))
        if as_gfx is None:
            out.append(Hit({"value": value, "gpu": g.get("name"), "gfx": gfx, "as_gfx": "no",
                            "advice": "it is not a version like 10.3.0, so ROCm ignores it or fails",
                            "fix": f"export HSA_OVERRIDE_GFX_VERSION={known[gfx]['override']}" if gfx in known
                            else "unset HSA_OVERRIDE_GFX_VERSION"}, ev))
            continue
        if as_gfx == gfx:
            continue
        if gfx in known and known[gfx]["override"] != value.strip():
            out.append(Hit({"value": value, "gpu": g.get("name"), "gfx": gfx, "as_gfx": as_gfx,
                            "advice": f"the override known to work for {gfx} is {known[gfx]['override']} "
                                      f"(runs as {known[gfx]['runs_as']})",
                            "fix": f"export HSA_OVERRIDE_GFX_VERSION={known[gfx]['override']}"}, ev))
        elif gfx not in known:
            out.append(Hit({"value": value, "gpu": g.get("name"), "gfx": gfx, "as_gfx": as_gfx,
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
def amd_igpu_first(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    text = dc.text("rocminfo.txt")
    amd = dc.gpus("amd")
    if text is None or len(amd) < 2:
        return []
    if any(dc.env(v) is not None for v in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")):
        return []
    agents = _rocminfo_gpus(text)
    integrated = {str(g.get("gfx_target")): bool(g.get("integrated")) for g in amd if g.get("gfx_target")}
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
def amd_device_nodes(dc: DoctorContext, row: Dict[str, Any]) -> Result:
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


# -- containers ------------------------------------------------------------------------------------------


@check("container_detected")
def container_detected(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    if not dc.containers:
        known = [n for n in ("dockerenv.txt", "proc-1-cgroup.txt") if dc.has(n)]
        if not known and dc.host.kind == "replay":
            return Unknown("the capture has none of the container markers (/.dockerenv, /run/.containerenv, "
                           "/proc/1/cgroup)")
        return []
    return [Hit({"what": dc.container_what()}, [ev for _, ev in dc.containers])]


def _pci_gpus(dc: DoctorContext, vendor: str) -> List[Dict[str, Any]]:
    return [g for g in dc.gpus(vendor) if any(s in ("lspci", "pci", "drm", "sysfs") or "pci" in s or "drm" in s
                                               for s in g.get("sources") or [])]


@check("container_gpu_not_passed")
def container_gpu_not_passed(dc: DoctorContext, row: Dict[str, Any]) -> Result:
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
def container_nvidia_libraries(dc: DoctorContext, row: Dict[str, Any]) -> Result:
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


# -- WSL ----------------------------------------------------------------------------------------------------


@check("wsl_detected")
def wsl_detected(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    kind, ev = dc.wsl
    return [Hit({"what": kind}, ev)] if kind else []


@check("wsl_no_gpu_bridge")
def wsl_no_gpu_bridge(dc: DoctorContext, row: Dict[str, Any]) -> Result:
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
        from .parse import load_json

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
def wsl_linux_nvidia_driver(dc: DoctorContext, row: Dict[str, Any]) -> Result:
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
def wsl_amd_rocm(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    from ..plan.conditions import evaluate
    from ..recipes import knowledge

    kind, ev = dc.wsl
    if kind is None or not dc.gpus("amd"):
        return []
    ctx = dict(dc.rules_ctx)
    ctx["os"] = dict(ctx["os"], wsl=True)
    out = evaluate({"test": "rocm_wsl_ok"}, ctx, knowledge())
    gpu_ev = _gfx_evidence(dc, next((g.get("gfx_target") for g in dc.gpus("amd") if g.get("gfx_target")), None))
    wsl_line = "amdgpu-install -y --usecase=wsl,rocm --no-dkms  # inside WSL, with AMD's Adrenalin driver on Windows"
    if out.value is False:
        best = dc.best("torch")
        install = dc.install_line("torch") if best and best.get("recipe") != "torch-rocm" else None
        return [Hit({"problem": "; ".join(out.reasons), "fix": install or PLAN_HINT}, _ev(gpu_ev, *ev[:1]))]
    return [Hit({"problem": f"{dc.gpu_words(dc.gpus('amd'))} under WSL2 needs AMD's WSL runtime of ROCm",
                 "fix": wsl_line}, _ev(gpu_ev, *ev[:1]), severity="info",
                detail="; ".join(out.warnings) + "; PyTorch's ROCm wheel then uses the WSL runtime's "
                       "libhsa-runtime64.so in place of the one it bundles (AMD's WSL guide)")]


# -- macOS ----------------------------------------------------------------------------------------------


@check("mps_macos_floor")
def mps_macos_floor(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    from ..plan.conditions import spec_contains

    if dc.system != "Darwin" or "torch" not in dc.frameworks:
        return []
    macos = (dc.report.get("os") or {}).get("macos_version")
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
def rosetta_python(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    if dc.system != "Darwin":
        return []
    machine, _, machine_ev = _python_platform(dc)
    translated = dc.line("sysctl.txt", r"sysctl\.proc_translated:\s*1")
    apple = dc.line("sysctl.txt", r"machdep\.cpu\.brand_string:\s*Apple") or dc.line("collect_env.txt", r"^Apple M\d")
    cpu = (dc.report.get("cpu") or {}).get("model") or "Apple silicon"
    if machine == "x86_64" and (translated or apple or str(cpu).startswith("Apple")):
        return [Hit({"cpu": cpu}, _ev(machine_ev, translated or apple))]
    return []


def P_json(dc: DoctorContext, key: str) -> Optional[str]:
    from .parse import json_line

    return json_line(dc.text("host.json") or "", key)


@check("macos_version_compat")
def macos_version_compat(dc: DoctorContext, row: Dict[str, Any]) -> Result:
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


# -- OpenCL ---------------------------------------------------------------------------------------------


def _opencl_users(dc: DoctorContext) -> List[str]:
    """The installed programs that open the system's OpenCL loader. pyopencl's wheels bundle a loader
    of their own, so pyopencl counts only when the scan's own pyopencl enumeration found nothing."""
    users: List[str] = [n for n in ("plaidml", "plaidml-keras") if n in dc.frameworks]
    opencl = (dc.report.get("runtimes") or {}).get("opencl") or {}
    if "pyopencl" in dc.frameworks and not opencl.get("platforms"):
        users.append("pyopencl")
    return users


@check("opencl_no_loader")
def opencl_no_loader(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    ocl = dc.opencl
    if ocl is None:
        return Unknown("no opencl-icd.json in the capture") if dc.system == "Linux" else []
    if not ocl.loader or any(a.path for a in ocl.loader):
        return []
    users = _opencl_users(dc)
    if not users and not (dc.report.get("gpus") or []):
        return []
    return [Hit({"who": ", ".join(users) or "OpenCL programs (clinfo, PlaidML)"},
                [Evidence(capture=dc.opencl_capture, line=f"{a.name}: {a.error or 'not found'}") for a in ocl.loader])]


@check("opencl_loaders_differ")
def opencl_loaders_differ(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    ocl = dc.opencl
    if ocl is None:
        return []
    paths = {a.name: a.path for a in ocl.loader}
    so, so1 = paths.get("libOpenCL.so"), paths.get("libOpenCL.so.1")
    if not so or not so1 or so == so1:
        return []
    return [Hit({"so": so, "so1": so1,
                 "fix": f"mkdir -p ~/.local/lib/opencl && ln -sf {so1} ~/.local/lib/opencl/libOpenCL.so && "
                        "export LD_LIBRARY_PATH=~/.local/lib/opencl:$LD_LIBRARY_PATH"},
                [Evidence(capture=dc.opencl_capture, line=f"libOpenCL.so -> {so}"),
                 Evidence(capture=dc.opencl_capture, line=f"libOpenCL.so.1 -> {so1}")],
                severity=None if _opencl_users(dc) else "info")]


@check("opencl_loader_ignores_filenames")
def opencl_loader_ignores_filenames(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    ocl = dc.opencl
    if ocl is None or not ocl.filenames_env:
        return []
    in_files = {a.name.split(".so")[0] for a in ocl.icds if a.where != "OCL_ICD_FILENAMES"}
    only_env = [a.name for a in ocl.icds if a.where == "OCL_ICD_FILENAMES" and a.name.split(".so")[0] not in in_files]
    deaf = [name for name, reads in ocl.reads_filenames if reads is False]
    if not only_env or not deaf:
        return []
    paths = {a.name: a.path for a in ocl.loader}
    folder = "~/.local/etc/OpenCL/vendors"
    lines = [f"mkdir -p {folder}"] + [f"echo {lib} > {folder}/{lib.split('.so')[0]}.icd" for lib in only_env]
    if ocl.vendors_dir:
        lines.append(f"cp {ocl.vendors_dir}/*.icd {folder}/")
    return [Hit({"loader": ", ".join(f"{n} ({paths.get(n) or '?'})" for n in deaf), "libraries": ", ".join(only_env),
                 "fix": " && ".join(lines) + f" && export OCL_ICD_VENDORS={folder}"},
                [Evidence(capture=dc.opencl_capture, line=f"{n}: reads_ocl_icd_filenames false, path {paths.get(n)}")
                 for n in deaf] + [Evidence(capture=dc.opencl_capture, line=f"OCL_ICD_FILENAMES={ocl.filenames_env}")],
                severity=None if _opencl_users(dc) else "info")]


@check("opencl_no_icd")
def opencl_no_icd(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    ocl = dc.opencl
    if ocl is None or not any(a.path for a in ocl.loader) or ocl.icds:
        return []
    if ocl.vendors_env and ocl.vendors_dir_exists is False:
        why = f"OCL_ICD_VENDORS={ocl.vendors_env} does not exist"
        fix = "unset OCL_ICD_VENDORS  # or point it at a folder of .icd files"
    else:
        why = f"{ocl.vendors_dir or '/etc/OpenCL/vendors'} " + ("has no .icd file" if ocl.vendors_dir_exists
                                                               else "does not exist") + " and OCL_ICD_FILENAMES is unset"
        fix = ("install the OpenCL driver of the GPU (Debian/Ubuntu: nvidia-opencl-icd, mesa-opencl-icd, "
               "intel-opencl-icd; ROCm: rocm-opencl-runtime) or pocl-opencl-icd for the CPU")
    return [Hit({"why": why, "fix": fix}, [Evidence(capture=dc.opencl_capture, line=f"vendors_dir {ocl.vendors_dir}: "
                                                    f"{'exists' if ocl.vendors_dir_exists else 'missing'}, no ICD")])]


@check("opencl_icd_broken")
def opencl_icd_broken(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    ocl = dc.opencl
    if ocl is None:
        return []
    return [Hit({"where": a.where, "library": a.name, "error": a.error,
                 "fix": f"reinstall the driver that owns {a.name}, or remove {a.where}" if a.where.endswith(".icd")
                 else f"remove {a.name} from OCL_ICD_FILENAMES"},
                [Evidence(capture=dc.opencl_capture, line=f"{a.where}: {a.name}: {a.error}")])
            for a in ocl.icds if a.error]


# -- the frameworks' own answer ------------------------------------------------------------------------------


def _expected_gpu(dc: DoctorContext, fw: Any) -> Optional[str]:
    """The kind of GPU device a framework's build should list on this machine, or None."""
    info = fw.info
    if fw.name == "torch":
        if info.get("hip") and dc.gpus("amd"):
            return "ROCm"
        if info.get("cuda") and dc.gpus("nvidia"):
            return "CUDA"
    if fw.name == "tensorflow" and info.get("built_with_cuda") and dc.gpus("nvidia"):
        return "GPU"
    if fw.name == "jax":
        plugins = " ".join(info.get("plugins") or {}) if isinstance(info.get("plugins"), dict) else ""
        if "cuda" in plugins and dc.gpus("nvidia"):
            return "CUDA"
        if "rocm" in plugins and dc.gpus("amd"):
            return "ROCm"
    return None


@check("framework_sees_no_gpu")
def framework_sees_no_gpu(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    if dc.enumeration is None:
        return Unknown(dc.enumeration_note or "no framework-devices.json in the capture")
    out = []
    for fw in dc.enumeration.frameworks:
        kind = _expected_gpu(dc, fw)
        if kind is None or fw.gpus() or fw.error:
            continue
        reason = next((str(u.get("reason")) for u in fw.unavailable if u.get("reason")), "no reason given")
        py = f" --python {dc.python}" if dc.python else ""
        fix = ("fix the blocking findings above first" if any(f.severity == "blocking" for f in getattr(dc, "found", []))
               else f"mlprobe verify --framework {fw.name}{py} -v  # the framework's own error, in full")
        out.append(Hit({"name": fw.name, "version": fw.version or "?", "kind": kind, "reason": reason, "fix": fix},
                       [Evidence(capture=dc.enumeration.source, line=reason)]))
    return out


@check("framework_enumeration_failed")
def framework_enumeration_failed(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    if dc.enumeration is None:
        return []
    py = f" --python {dc.python}" if dc.python else ""
    out = [Hit({"name": fw.name, "error": fw.error, "fix": f"mlprobe verify --framework {fw.name}{py} -v"},
               [Evidence(capture=dc.enumeration.source, line=str(fw.error))])
           for fw in dc.enumeration.frameworks if fw.error]
    if dc.enumeration.error:
        out.append(Hit({"name": "the interpreter", "error": dc.enumeration.error,
                        "fix": "check that it is a working Python 3.7 or newer"},
                       [Evidence(capture=dc.enumeration.source, line=dc.enumeration.error)]))
    return out


@check("framework_sees_gpu")
def framework_sees_gpu(dc: DoctorContext, row: Dict[str, Any]) -> Result:
    if dc.enumeration is None:
        return []
    out = []
    for fw in dc.enumeration.frameworks:
        gpus = fw.gpus()
        if gpus:
            shown = ", ".join(f"{d.get('id')} {d.get('name') or ''}".strip() for d in gpus[:4])
            out.append(Hit({"name": fw.name, "version": fw.version or "?", "devices": shown},
                           [Evidence(capture=dc.enumeration.source, line=shown)]))
    return out
