"""Doctor checks: the installed build (a CPU-only torch, another vendor's build, a JAX without its GPU
plugin, a TensorFlow without GPU support, two builds of one framework swapped)."""

from __future__ import annotations

import re

from ...model import shell
from ...model.doctor import Evidence
from ...model.vocabulary import vocabulary
from ...model.knowledge import Row
from ..context import DoctorContext
from ._base import Hit, PLAN_HINT, Result, Unknown, _ev, _flavour, _seen_reason, _version, check

# -- the build


@check("torch_cpu_build")
def torch_cpu_build(dc: DoctorContext, row: Row) -> Result:
    flavour = _flavour(dc)
    if "torch" not in dc.frameworks:
        return []
    if flavour is None:
        return Unknown("the capture does not say which build torch is (CPU, CUDA, ROCm)")
    if flavour != "cpu" or dc.system == "Darwin":
        return []
    finding = dc.installed("torch")
    best = dc.best("torch")
    if not finding or finding.status != "problem" or not best:
        return []
    vendor = vocabulary().backend_vendor(best.backend) or ""  # the registry's: cuda runs on nvidia, ...
    gpus = dc.gpus(vendor)
    return [Hit({"version": _version(dc, "torch"), "gpu": dc.gpu_words(gpus), "recipe": best.recipe,
                 "install": dc.install_line("torch")},
                _ev(dc.framework_evidence("torch"), *(dc.gpu_evidence(g) for g in gpus[:1]),
                    _seen_reason(dc, "torch")))]


@check("torch_wrong_vendor")
def torch_wrong_vendor(dc: DoctorContext, row: Row) -> Result:
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
def jax_no_gpu_plugin(dc: DoctorContext, row: Row) -> Result:
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
def tensorflow_no_gpu(dc: DoctorContext, row: Row) -> Result:
    nv = dc.gpus("nvidia")
    if not nv or dc.system != "Linux":
        return []
    best = dc.best("tensorflow")
    for name in ("tensorflow-cpu", "tensorflow", "tensorflow-intel"):
        if name not in dc.frameworks:
            continue
        seen = dc.seen("tensorflow")
        no_cuda = name == "tensorflow-cpu" or (seen is not None and seen.info.get("built_with_cuda") is False)
        if no_cuda and best and best.backend == "cuda":
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
def build_swapped(dc: DoctorContext, row: Row) -> Result:
    flavour = _flavour(dc)
    best = dc.best("torch")
    finding = dc.installed("torch")
    if not flavour or not best or not best.index or not re.match(r"^(cu|rocm)", flavour):
        return []
    if not finding or finding.status != "ok" or flavour == best.index:
        return []
    mm = ".".join(_version(dc, "torch").split("+")[0].split(".")[:2])
    if mm != ".".join((best.version or "").split(".")[:2]):
        return []  # another release: its index choices differ, which is no sign of a swap
    if flavour[:2] != best.index[:2]:
        return []  # another vendor's build: torch-wrong-vendor says so
    return [Hit({"version": _version(dc, "torch"), "build": flavour, "wanted": best.index,
                 "index_url": shell.posix([best.index_url or best.index])},
                _ev(dc.framework_evidence("torch")),
                detail=f"the plan recommends {best.recipe} from the {best.index} index; "
                       f"the installed build ({flavour}) fits this machine too, so this is a warning only")]
