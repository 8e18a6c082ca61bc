"""Doctor checks: the OpenCL loader and its ICD files (no loader, loaders that differ, a loader that
ignores OCL_ICD_FILENAMES, no ICD, an ICD whose library is missing)."""

from __future__ import annotations

from typing import List

from ...model import shell
from ...model.doctor import Evidence
from ...model.knowledge import Row, rows
from ..context import DoctorContext
from ._base import Hit, Result, Unknown, check

# -- OpenCL


def _loader_openers() -> List[str]:
    """The distributions of the frameworks that open the system's OpenCL loader themselves
    (knowledge/opencl_loaders.json: PlaidML, and PlaidML-Keras on top of it)."""
    return [str(d) for r in rows("opencl_loaders", "frameworks") if r.get("opens")
            for d in (r.get("distributions") or [r.get("framework")]) if d]


def _opencl_users(dc: DoctorContext) -> List[str]:
    """The installed programs that open the system's OpenCL loader. pyopencl's wheels bundle a loader
    of their own, so pyopencl counts only when the scan's own pyopencl enumeration found nothing."""
    users: List[str] = [n for n in _loader_openers() if n in dc.frameworks]
    opencl = dc.facts.runtimes.opencl
    if "pyopencl" in dc.frameworks and not (opencl is not None and opencl.platforms):
        users.append("pyopencl")
    return users


@check("opencl_no_loader")
def opencl_no_loader(dc: DoctorContext, row: Row) -> Result:
    ocl = dc.opencl
    if ocl is None:
        return Unknown("no opencl-icd.json in the capture") if dc.system == "Linux" else []
    if not ocl.loader or any(a.path for a in ocl.loader):
        return []
    users = _opencl_users(dc)
    if not users and not dc.facts.gpus:
        return []
    return [Hit({"who": ", ".join(users) or "OpenCL programs (clinfo, PlaidML)"},
                [Evidence(capture=dc.opencl_capture, line=f"{a.name}: {a.error or 'not found'}") for a in ocl.loader])]


@check("opencl_loaders_differ")
def opencl_loaders_differ(dc: DoctorContext, row: Row) -> Result:
    ocl = dc.opencl
    if ocl is None:
        return []
    paths = {a.name: a.path for a in ocl.loader}
    so, so1 = paths.get("libOpenCL.so"), paths.get("libOpenCL.so.1")
    if not so or not so1 or so == so1:
        return []
    return [Hit({"so": so, "so1": so1,
                 "fix": f"mkdir -p ~/.local/lib/opencl && ln -sf {shell.posix([so1])} ~/.local/lib/opencl/libOpenCL.so && "
                        "export LD_LIBRARY_PATH=~/.local/lib/opencl:$LD_LIBRARY_PATH"},
                [Evidence(capture=dc.opencl_capture, line=f"libOpenCL.so -> {so}"),
                 Evidence(capture=dc.opencl_capture, line=f"libOpenCL.so.1 -> {so1}")],
                severity=None if _opencl_users(dc) else "info")]


@check("opencl_loader_ignores_filenames")
def opencl_loader_ignores_filenames(dc: DoctorContext, row: Row) -> Result:
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
def opencl_no_icd(dc: DoctorContext, row: Row) -> Result:
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
def opencl_icd_broken(dc: DoctorContext, row: Row) -> Result:
    ocl = dc.opencl
    if ocl is None:
        return []
    return [Hit({"where": a.where, "library": a.name, "error": a.error,
                 "fix": f"reinstall the driver that owns {a.name}, or remove {a.where}" if a.where.endswith(".icd")
                 else f"remove {a.name} from OCL_ICD_FILENAMES"},
                [Evidence(capture=dc.opencl_capture, line=f"{a.where}: {a.name}: {a.error}")])
            for a in ocl.icds if a.error]


def _lib_stem(lib: str) -> str:
    """`libnvidia-opencl.so.1`, `/usr/lib/libnvidia-opencl.so.580.159.04` -> `libnvidia-opencl`."""
    return lib.rsplit("/", 1)[-1].split(".so")[0]


@check("opencl_icd_not_registered")
def opencl_icd_not_registered(dc: DoctorContext, row: Row) -> Result:
    """A vendor's OpenCL driver library that the loader cache holds, for a GPU of that vendor the
    machine has, which no ICD entry names (the vendors folder's .icd files, OCL_ICD_FILENAMES): no
    loader loads it, so clinfo and PlaidML do not list the GPU (knowledge/opencl_loaders.json
    `vendor_icds`). The NVIDIA container toolkit mounts libnvidia-opencl.so.1 but writes no .icd."""
    ocl = dc.opencl
    cache = dc.ldconfig
    if ocl is None or cache is None:
        return []
    named = {_lib_stem(a.name) for a in ocl.icds}
    out: List[Hit] = []
    for v in rows("opencl_loaders", "vendor_icds"):
        lib, icd, vendor = str(v.get("library") or ""), str(v.get("icd_file") or ""), str(v.get("gpu_vendor") or "")
        gpus = dc.gpus(vendor)
        found = cache.get(lib) or []
        if not lib or not gpus or not found or _lib_stem(lib) in named:
            continue
        folder = "~/.local/etc/OpenCL/vendors"
        system = ocl.vendors_dir or "/etc/OpenCL/vendors"
        user_fix = (f"mkdir -p {folder} && echo {lib} > {folder}/{icd}"
                    + (f" && cp {system}/*.icd {folder}/" if any(a.where.endswith(".icd") for a in ocl.icds) else "")
                    + f" && export OCL_ICD_VENDORS={folder}")
        entries = ", ".join(f"{a.where.rsplit('/', 1)[-1]} ({a.name})" for a in ocl.icds) or "no .icd file"
        evidence = [Evidence(capture="ldconfig-p.txt", line=line.strip()) for _, line in found[:2]]
        evidence.append(Evidence(capture=dc.opencl_capture, line=f"vendors_dir {system}: {entries}; "
                                 f"OCL_ICD_FILENAMES={ocl.filenames_env or 'unset'}"))
        out.append(Hit({"library": lib, "gpus": dc.gpu_words(gpus), "icd": icd, "system": system,
                        "fix": user_fix, "root_fix": f"echo {lib} > {system}/{icd}  # as root"},
                       evidence, severity=None if _opencl_users(dc) else "info"))
    return out
