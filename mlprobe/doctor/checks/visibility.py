"""Doctor checks: what the environment hides (CUDA/HIP/ROCR visible-devices variables, JAX_PLATFORMS,
a system CUDA first on LD_LIBRARY_PATH)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List

from ...model import shell
from ...model.facts import GpuFacts
from ...model.knowledge import Row, rows
from ..context import DoctorContext
from ._base import Hit, Result, _ev, _flavour, _version, check

# -- visibility


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


@dataclass(frozen=True)
class _Shown:
    """A visibility variable that is set, the vendor's GPUs it applies to, and how many it leaves."""

    name: str  # the variable
    who: str  # what reads it (the row's words)
    value: str
    vendor: str
    gpus: List[GpuFacts]
    visible: int

    @property
    def count(self) -> int:
        return len(self.gpus)


def _visibility(dc: DoctorContext) -> List[_Shown]:
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
                uuids = [g.uuid for g in gpus if g.uuid and "<" not in g.uuid]
                visible = _visible(value, count, uuids) if value.strip() else 0
            out.append(_Shown(name=str(r["name"]), who=str(r.get("who")), value=value, vendor=str(vendor), gpus=gpus,
                              visible=visible))
            break
    return out


@check("visible_devices_hide_all")
def visible_devices_hide_all(dc: DoctorContext, row: Row) -> Result:
    hits = []
    for v in _visibility(dc):
        if v.visible == 0:
            hits.append(Hit({"variable": v.name, "shown": repr(v.value) if not v.value.strip() else v.value,
                             "vendor": {"nvidia": "NVIDIA", "amd": "AMD"}[v.vendor], "who": v.who,
                             "all": ",".join(str(i) for i in range(v.count))},
                            _ev(dc.env_evidence(v.name), dc.gpu_evidence(v.gpus[0]))))
    return hits


@check("visible_devices_subset")
def visible_devices_subset(dc: DoctorContext, row: Row) -> Result:
    return [Hit({"variable": v.name, "shown": v.value, "visible": v.visible, "count": v.count,
                 "vendor": {"nvidia": "NVIDIA", "amd": "AMD"}[v.vendor]}, _ev(dc.env_evidence(v.name)))
            for v in _visibility(dc) if 0 < v.visible < v.count]


@check("jax_platforms_cpu")
def jax_platforms_cpu(dc: DoctorContext, row: Row) -> Result:
    value = dc.env("JAX_PLATFORMS")
    if value is None or "jax" not in dc.frameworks or not (dc.gpus("nvidia") or dc.gpus("amd")):
        return []
    wanted = {p.strip().lower() for p in value.split(",") if p.strip()}
    if wanted and not wanted & {"cuda", "gpu", "rocm"}:
        return [Hit({"value": value}, _ev(dc.env_evidence("JAX_PLATFORMS")))]
    return []


@check("ld_library_path_system_cuda")
def ld_library_path_system_cuda(dc: DoctorContext, row: Row) -> Result:
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
    fix = shell.set_env("LD_LIBRARY_PATH", ":".join(rest)) if rest else "unset LD_LIBRARY_PATH"
    return [Hit({"folders": ", ".join(bad), "version": _version(dc, "torch"), "fix": fix},
                _ev(dc.env_evidence("LD_LIBRARY_PATH"), dc.framework_evidence("torch")),
                detail="the dynamic linker reads LD_LIBRARY_PATH before the library path baked into torch, so "
                       "their cuDNN/cuBLAS load instead of the pip-installed ones: `undefined symbol` errors or "
                       "wrong versions at import")]
