# Runs in a child process (python path/to/opencl_child.py): enumerate OpenCL through pyopencl
# and print one JSON document. Standard library + pyopencl only; Python 3.7 compatible.
# Kept out of the scan process because an OpenCL driver can hang or crash it.
#
# Fast path: load pyopencl's compiled binding (pyopencl._cl) directly, with the one setting
# pyopencl/__init__.py makes before it (PYOPENCL_HOME, which tells the bundled ocl-icd loader where
# the shipped ICDs are). Enumeration only needs the binding; the package's Python layer (array,
# tools, pytools, code generation) costs ~0.1 s of imports. MLPROBE_OPENCL_IMPORT=full, or any
# failure of the fast path, uses `import pyopencl` instead; the parent retries with `full` if the
# fast child dies of a signal.
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Optional

# CL_DEVICE_TYPE_* bits (Khronos cl.h)
DEVICE_TYPES = ((1 << 1, "CPU"), (1 << 2, "GPU"), (1 << 3, "ACCELERATOR"), (1 << 4, "CUSTOM"), (1 << 0, "DEFAULT"))


def _binding() -> Any:
    """pyopencl's compiled module: fast (binding only) or full (`import pyopencl`)."""
    import importlib.util

    spec = importlib.util.find_spec("pyopencl")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("pyopencl is not installed")
    if os.environ.get("MLPROBE_OPENCL_IMPORT") != "full":
        try:
            pkg_dir = list(spec.submodule_search_locations)[0]
            names = [n for n in os.listdir(pkg_dir) if n.startswith("_cl.") and n.endswith((".so", ".pyd"))]
            if names:
                os.environ.setdefault("PYOPENCL_HOME", pkg_dir)
                sub = importlib.util.spec_from_file_location("pyopencl._cl", os.path.join(pkg_dir, names[0]))
                if sub is not None and sub.loader is not None:
                    mod = importlib.util.module_from_spec(sub)
                    sub.loader.exec_module(mod)
                    return mod
        except Exception:
            pass
    import pyopencl

    return pyopencl


def _info(obj: Any, cl_enum: Any, name: str) -> Any:
    try:
        return obj.get_info(getattr(cl_enum, name))
    except Exception:
        return None


def _type_name(bits: Any) -> Optional[str]:
    if not isinstance(bits, int):
        return None
    names = [n for b, n in DEVICE_TYPES if bits & b]
    return " | ".join(names) if names else str(bits)


def icd_vendors_dir(env: Any, tmp: str) -> Optional[str]:
    """A vendors directory that gives pyopencl's bundled loader the ICDs the system's ICD loader would load.

    pyopencl's Linux wheels bundle an older loader that reads OCL_ICD_VENDORS (or /etc/OpenCL/vendors)
    and PYOPENCL_HOME, but not OCL_ICD_FILENAMES (the Khronos ICD loader's list of ICD libraries,
    loaded before the vendors directory: loader/icd.c, khrIcdVendorsEnumerateEnv). Containers often
    name NVIDIA's ICD only there (OCL_ICD_FILENAMES=libnvidia-opencl.so.1), so `clinfo` lists NVIDIA's
    platform and the bundled loader does not.
    With OCL_ICD_FILENAMES set, this writes `tmp` holding the vendors directory's .icd files plus one
    .icd per listed library, for OCL_ICD_VENDORS, each library once; None when there is nothing to add."""
    names = [n for n in (env.get("OCL_ICD_FILENAMES") or "").split(":") if n.strip()]
    if not names:
        return None
    vendors = env.get("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
    lines = []
    for i, lib in enumerate(names):
        lines.append(("%02d-filenames.icd" % i, lib.strip()))
    try:
        if os.path.isdir(vendors):
            for n in sorted(os.listdir(vendors)):
                if n.endswith(".icd"):
                    with open(os.path.join(vendors, n), "r") as fh:
                        lines.append(("50-" + n, fh.read().strip()))
        elif os.path.isfile(vendors):
            with open(vendors, "r") as fh:
                lines.append(("50-" + os.path.basename(vendors), fh.read().strip()))
    except OSError:
        pass
    seen = set()
    for name, lib in lines:
        if not lib:
            continue
        key = _library_key(lib)
        if key in seen:
            continue
        seen.add(key)
        with open(os.path.join(tmp, name), "w") as fh:
            fh.write(lib + "\n")
    return tmp


def _library_key(lib: str) -> Any:
    """What makes two ICD entries the same vendor for the Khronos loader: it loads each entry and skips
    one whose library handle it already holds ("already loaded vendor", loader/icd.c), so a library
    named both in OCL_ICD_FILENAMES and in the vendors directory (libpocl.so.2 there, libpocl.so.2.12.0
    here: one file) is one platform. dlopen gives one handle per file; an entry that does not load is
    kept under its own name (the loader will skip it as well)."""
    import ctypes

    try:
        return ("handle", ctypes.CDLL(lib, mode=os.RTLD_LAZY | os.RTLD_LOCAL)._handle)
    except OSError:
        return ("name", os.path.realpath(lib) if "/" in lib else lib)


def main() -> int:
    # PoCL writes a kernel cache under ~/.cache/pocl when it initialises; a scan must not write to
    # the user's home, so unless the user chose a cache dir, it gets a temporary one.
    tmp_cache = None
    tmp_icd = tempfile.mkdtemp(prefix="mlprobe-icd-") if os.environ.get("OCL_ICD_FILENAMES") else None
    if tmp_icd is not None:
        vendors = icd_vendors_dir(os.environ, tmp_icd)
        if vendors:
            os.environ["OCL_ICD_VENDORS"] = vendors
            # The bundled loader also loads the ICDs under $PYOPENCL_HOME/.libs (the wheel's own PoCL),
            # which the system's loader does not: point it at a folder without them, so that the child
            # lists exactly what `clinfo` lists. (`import pyopencl`, the fallback, resets it.)
            os.environ["PYOPENCL_HOME"] = vendors
    if "POCL_CACHE_DIR" not in os.environ:
        tmp_cache = tempfile.mkdtemp(prefix="mlprobe-pocl-")
        os.environ["POCL_CACHE_DIR"] = tmp_cache
    try:
        return _enumerate()
    finally:
        for tmp in (tmp_cache, tmp_icd):
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)


def _enumerate() -> int:
    try:
        cl = _binding()
    except Exception as exc:  # not installed, or its native library fails to load
        print(json.dumps({"error": "pyopencl could not be imported: %s" % exc, "absent": True}))
        return 0
    try:
        platforms = cl.get_platforms()
    except Exception as exc:
        # pyopencl raises when no ICD is registered: that means "no OpenCL", not a failure.
        msg = str(exc)
        absent = "PLATFORM_NOT_FOUND" in msg or "-1001" in msg
        print(json.dumps({"error": "no OpenCL platform: %s" % msg, "absent": absent, "platforms": []}))
        return 0
    pi, di = cl.platform_info, cl.device_info
    out = []
    for p in platforms:
        devs = []
        try:
            devices = p.get_devices()
        except Exception:
            devices = []
        for d in devices:
            ext = _info(d, di, "EXTENSIONS") or ""
            board = _info(d, di, "BOARD_NAME_AMD") if "cl_amd_device_attribute_query" in ext else None
            cc = None
            if "cl_nv_device_attribute_query" in ext:
                cc = [_info(d, di, "COMPUTE_CAPABILITY_MAJOR_NV"),
                      _info(d, di, "COMPUTE_CAPABILITY_MINOR_NV")]
            devs.append({
                "name": (_info(d, di, "NAME") or "").strip() or None,
                "type": _type_name(_info(d, di, "TYPE")),
                "vendor": (_info(d, di, "VENDOR") or "").strip() or None,
                "vendor_id": _info(d, di, "VENDOR_ID"),
                "driver_version": _info(d, di, "DRIVER_VERSION"),
                "version": _info(d, di, "VERSION"),
                "opencl_c_version": _info(d, di, "OPENCL_C_VERSION"),
                "compute_units": _info(d, di, "MAX_COMPUTE_UNITS"),
                "global_memory_bytes": _info(d, di, "GLOBAL_MEM_SIZE"),
                "host_unified_memory": bool(_info(d, di, "HOST_UNIFIED_MEMORY")),
                "fp16": "cl_khr_fp16" in ext,
                "fp64": "cl_khr_fp64" in ext or bool(_info(d, di, "DOUBLE_FP_CONFIG")),
                "board_name": board,
                "compute_capability": cc,
            })
        out.append({"name": _info(p, pi, "NAME"), "vendor": _info(p, pi, "VENDOR"),
                    "version": _info(p, pi, "VERSION"), "devices": devs})
    print(json.dumps({"platforms": out}))
    return 0


def write_vendors_dir(folder: str) -> int:
    """`opencl_child.py --vendors-dir FOLDER`: write into FOLDER (which exists) the .icd files that give
    an ICD loader reading only OCL_ICD_VENDORS what this environment names (its vendors folder and
    OCL_ICD_FILENAMES); the device check's fix for a loader that ignores OCL_ICD_FILENAMES."""
    env = dict(os.environ)
    if os.path.normpath(env.get("OCL_ICD_VENDORS") or "") == os.path.normpath(folder):
        env.pop("OCL_ICD_VENDORS")  # the folder being written is not a source of itself
    if icd_vendors_dir(env, folder) is None:  # no OCL_ICD_FILENAMES: the vendors folder's own entries
        vendors = env.get("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
        for n in sorted(os.listdir(vendors)) if os.path.isdir(vendors) else []:
            if n.endswith(".icd"):
                shutil.copyfile(os.path.join(vendors, n), os.path.join(folder, n))
    print(json.dumps({"vendors_dir": folder, "files": sorted(os.listdir(folder))}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--vendors-dir":
        sys.exit(write_vendors_dir(sys.argv[2]))
    sys.exit(main())
