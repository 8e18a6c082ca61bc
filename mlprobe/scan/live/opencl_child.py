# Runs in a child process (python path/to/opencl_child.py): enumerate OpenCL through pyopencl
# and print one JSON document. Standard library + pyopencl only; Python 3.7 compatible.
# Kept out of the scan process because an OpenCL driver can hang or crash it.
#
# Fastest path (default): call pyopencl's own ICD loader (the libOpenCL its wheel bundles under
# pyopencl/.libs, the library its binding links) through ctypes, with the one setting
# pyopencl/__init__.py makes first (PYOPENCL_HOME, which tells that loader where the shipped ICDs
# are). The same loader sees the same platforms; pyopencl's binding imports all of numpy when it
# loads (~0.06-0.09 s), which is most of what enumeration costs on a CPU-only machine.
# MLPROBE_OPENCL_IMPORT=binding loads pyopencl's compiled binding (pyopencl._cl) instead, =full uses
# `import pyopencl`; a wheel without a bundled loader, or any failure of a faster path, falls
# through to the next one; the parent retries with `full` if the fast child dies of a signal.
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, List, Optional, Sequence, Tuple

# MLPROBE_OPENCL_TIMES=1: the child writes where its time went to stderr, one JSON line
# ({"phases": [[label, seconds since the previous mark], ...]}); benchmarks/bench_scan.py reads it.
_TIMES: Optional[List[Tuple[str, float]]] = [] if os.environ.get("MLPROBE_OPENCL_TIMES") == "1" else None
_LAST = [time.perf_counter()]


def _mark(label: str) -> None:
    if _TIMES is not None:
        now = time.perf_counter()
        _TIMES.append((label, round(now - _LAST[0], 6)))
        _LAST[0] = now

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


# cl.h values of the queries the enumeration makes (Khronos OpenCL-Headers CL/cl.h, cl_ext.h)
_PLATFORM_INFO = {"NAME": 0x0902, "VENDOR": 0x0903, "VERSION": 0x0901}
_DEVICE_STR = {"NAME": 0x102B, "VENDOR": 0x102C, "DRIVER_VERSION": 0x102D, "VERSION": 0x102F,
               "EXTENSIONS": 0x1030, "OPENCL_C_VERSION": 0x103D, "BOARD_NAME_AMD": 0x4038}
_DEVICE_UINT = {"VENDOR_ID": (0x1001, "I"), "MAX_COMPUTE_UNITS": (0x1002, "I"), "GLOBAL_MEM_SIZE": (0x101F, "Q"),
                "HOST_UNIFIED_MEMORY": (0x1035, "I"), "TYPE": (0x1000, "Q"), "DOUBLE_FP_CONFIG": (0x1032, "Q"),
                "COMPUTE_CAPABILITY_MAJOR_NV": (0x4000, "I"), "COMPUTE_CAPABILITY_MINOR_NV": (0x4001, "I")}
_DEVICE_TYPE_ALL = 0xFFFFFFFF
_ERRORS = {-1: "DEVICE_NOT_FOUND", -5: "OUT_OF_RESOURCES", -6: "OUT_OF_HOST_MEMORY", -30: "INVALID_VALUE",
           -32: "INVALID_PLATFORM", -33: "INVALID_DEVICE", -1001: "PLATFORM_NOT_FOUND_KHR"}


class CLError(Exception):
    """An OpenCL call that returned an error code (worded like pyopencl's LogicError)."""

    def __init__(self, call: str, code: int) -> None:
        Exception.__init__(self, "%s failed: %s" % (call, _ERRORS.get(code, str(code))))
        self.code = code


def _bundled_loader() -> Optional[str]:
    """The libOpenCL that pyopencl's wheel bundles (its binding links it through $ORIGIN/.libs)."""
    import importlib.util

    spec = importlib.util.find_spec("pyopencl")
    if spec is None or not spec.submodule_search_locations:
        return None
    pkg_dir = list(spec.submodule_search_locations)[0]
    libs = os.path.join(pkg_dir, ".libs")
    try:
        names = sorted(n for n in os.listdir(libs) if n.startswith("libOpenCL"))
    except OSError:
        return None
    if not names:
        return None
    os.environ.setdefault("PYOPENCL_HOME", pkg_dir)
    # The loader reads the wheel's own ICDs only from $PYOPENCL_HOME/.libs; when main() pointed
    # PYOPENCL_HOME at the system's list instead, loading them would cost time for nothing (the
    # wheel's PoCL links its own LLVM: tens of milliseconds to map and relocate).
    if os.path.normpath(os.environ["PYOPENCL_HOME"]) == os.path.normpath(pkg_dir):
        _preload_bundled_icds(libs)
        _mark("preload the wheel's ICD libraries")
    return os.path.join(libs, names[0])


def _preload_bundled_icds(libs: str) -> None:
    """The wheel's .icd files name their library bare (`libpocl-21062cec.so`); the loader's dlopen
    finds it through the binding's RPATH ($ORIGIN/.libs), which a loader opened through ctypes does
    not have. Loading each such library first by its path makes that dlopen return it by its soname,
    so exactly the libraries the binding would find are found."""
    import ctypes

    for icd in sorted(n for n in os.listdir(libs) if n.endswith(".icd")):
        try:
            with open(os.path.join(libs, icd), "r") as fh:
                lib = fh.read().strip()
        except OSError:
            continue
        if lib and "/" not in lib and os.path.isfile(os.path.join(libs, lib)):
            try:
                ctypes.CDLL(os.path.join(libs, lib), mode=os.RTLD_LAZY | os.RTLD_LOCAL)
            except OSError:
                pass


class _CtypesCL(object):
    """The few calls enumeration needs, straight from the ICD loader; answers the same get_info
    values pyopencl does (str without the terminating NUL, int for the numeric queries)."""

    def __init__(self, path: str) -> None:
        import ctypes

        self.c = ctypes
        lib = ctypes.CDLL(path)
        size_p = ctypes.POINTER(ctypes.c_size_t)
        self.get_platform_ids = lib.clGetPlatformIDs
        self.get_platform_ids.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]
        self.get_platform_info = lib.clGetPlatformInfo
        self.get_platform_info.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p, size_p]
        self.get_device_ids = lib.clGetDeviceIDs
        self.get_device_ids.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p,
                                        ctypes.POINTER(ctypes.c_uint32)]
        self.get_device_info = lib.clGetDeviceInfo
        self.get_device_info.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p, size_p]
        for fn in (self.get_platform_ids, self.get_platform_info, self.get_device_ids, self.get_device_info):
            fn.restype = ctypes.c_int32

    def _ids(self, call: str, fn: Any, *head: Any) -> "list[Any]":
        c = self.c
        n = c.c_uint32(0)
        err = fn(*(head + (0, None, c.byref(n))))
        if err:
            raise CLError(call, err)
        arr = (c.c_void_p * max(n.value, 1))()
        err = fn(*(head + (n.value, arr, c.byref(n))))
        if err:
            raise CLError(call, err)
        return list(arr[:n.value])

    def platforms(self) -> "list[Any]":
        return self._ids("clGetPlatformIDs", self.get_platform_ids)

    def devices(self, platform: Any) -> "list[Any]":
        return self._ids("clGetDeviceIDs", self.get_device_ids, platform, _DEVICE_TYPE_ALL)

    def _raw(self, fn: Any, obj: Any, param: int) -> Any:
        c = self.c
        size = c.c_size_t(0)
        err = fn(obj, param, 0, None, c.byref(size))
        if err:
            raise CLError("clGet*Info", err)
        buf = c.create_string_buffer(max(size.value, 1))
        err = fn(obj, param, size.value, buf, None)
        if err:
            raise CLError("clGet*Info", err)
        return buf.raw[:size.value]

    def text(self, fn: Any, obj: Any, param: int) -> str:
        raw: bytes = self._raw(fn, obj, param)
        return raw[:-1].decode("utf-8", "replace") if raw.endswith(b"\0") else raw.decode("utf-8", "replace")

    def number(self, obj: Any, param: int, fmt: str) -> int:
        import struct

        raw = self._raw(self.get_device_info, obj, param)
        value: int = struct.unpack("=" + fmt, raw[:struct.calcsize(fmt)])[0]
        return int(value)


def _safe(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None


def enumerate_ctypes(cl: _CtypesCL) -> "dict[str, Any]":
    """The document `_enumerate` prints, from the ICD loader called through ctypes."""
    try:
        platforms = cl.platforms()
    except Exception as exc:
        msg = str(exc)
        absent = "PLATFORM_NOT_FOUND" in msg or "-1001" in msg
        return {"error": "no OpenCL platform: %s" % msg, "absent": absent, "platforms": []}
    _mark("clGetPlatformIDs (loads and starts every ICD)")
    pinfo, dinfo = cl.get_platform_info, cl.get_device_info
    out = []
    for p in platforms:
        devs = []
        try:
            devices = cl.devices(p)
        except Exception:
            devices = []
        for d in devices:
            def s(name: str) -> Any:
                return _safe(cl.text, dinfo, d, _DEVICE_STR[name])

            def n(name: str) -> Any:
                return _safe(cl.number, d, *_DEVICE_UINT[name])
            ext = s("EXTENSIONS") or ""
            cc = None
            if "cl_nv_device_attribute_query" in ext:
                cc = [n("COMPUTE_CAPABILITY_MAJOR_NV"), n("COMPUTE_CAPABILITY_MINOR_NV")]
            devs.append(_device_record(
                s("NAME"), _type_name(n("TYPE")), s("VENDOR"), n("VENDOR_ID"), s("DRIVER_VERSION"), s("VERSION"),
                s("OPENCL_C_VERSION"), n("MAX_COMPUTE_UNITS"), n("GLOBAL_MEM_SIZE"), n("HOST_UNIFIED_MEMORY"), ext,
                n("DOUBLE_FP_CONFIG"), s("BOARD_NAME_AMD") if "cl_amd_device_attribute_query" in ext else None, cc))
        out.append({"name": _safe(cl.text, pinfo, p, _PLATFORM_INFO["NAME"]),
                    "vendor": _safe(cl.text, pinfo, p, _PLATFORM_INFO["VENDOR"]),
                    "version": _safe(cl.text, pinfo, p, _PLATFORM_INFO["VERSION"]), "devices": devs})
        _mark("devices of platform %d" % len(out))
    return {"platforms": out}


def _device_record(name: Any, type_name: Any, vendor: Any, vendor_id: Any, driver_version: Any, version: Any,
                   c_version: Any, units: Any, memory: Any, unified: Any, ext: str, fp_config: Any, board: Any,
                   cc: Any) -> "dict[str, Any]":
    """One device of the document, the same for every path (ctypes, binding, full import)."""
    return {
        "name": (name or "").strip() or None,
        "type": type_name,
        "vendor": (vendor or "").strip() or None,
        "vendor_id": vendor_id,
        "driver_version": driver_version,
        "version": version,
        "opencl_c_version": c_version,
        "compute_units": units,
        "global_memory_bytes": memory,
        "host_unified_memory": bool(unified),
        "fp16": "cl_khr_fp16" in ext,
        "fp64": "cl_khr_fp64" in ext or bool(fp_config),
        "board_name": board,
        "compute_capability": cc,
    }


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
    _mark("start to main (imports)")
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
    _mark("vendors list and cache folder")
    try:
        return _enumerate()
    finally:
        for tmp in (tmp_cache, tmp_icd):
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
        _mark("remove the temporary folders")
        if _TIMES is not None:
            sys.stderr.write(json.dumps({"phases": _TIMES}) + "\n")
        _close_output()


def _close_output() -> None:
    """The answer is complete: close this process's stdout and stderr, so that the scan goes on while
    it ends. Ending is not free where a GPU driver is loaded (NVIDIA's OpenCL tears its context down
    at exit: about a tenth of a second), and nothing after this line is output."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _enumerate() -> int:
    mode = os.environ.get("MLPROBE_OPENCL_IMPORT")
    if mode not in ("binding", "full"):
        try:
            path = _bundled_loader()
            _mark("find the wheel's loader")
            cl_lib = _CtypesCL(path) if path else None
            _mark("load the ICD loader")
            doc = enumerate_ctypes(cl_lib) if cl_lib else None
        except Exception:  # no such symbol, a loader that will not load: the binding's way below
            doc = None
        if doc is not None:
            print(json.dumps(doc))
            _mark("write the document")
            return 0
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
            devs.append(_device_record(
                _info(d, di, "NAME"), _type_name(_info(d, di, "TYPE")), _info(d, di, "VENDOR"),
                _info(d, di, "VENDOR_ID"), _info(d, di, "DRIVER_VERSION"), _info(d, di, "VERSION"),
                _info(d, di, "OPENCL_C_VERSION"), _info(d, di, "MAX_COMPUTE_UNITS"), _info(d, di, "GLOBAL_MEM_SIZE"),
                _info(d, di, "HOST_UNIFIED_MEMORY"), ext, _info(d, di, "DOUBLE_FP_CONFIG"), board, cc))
        out.append({"name": _info(p, pi, "NAME"), "vendor": _info(p, pi, "VENDOR"),
                    "version": _info(p, pi, "VERSION"), "devices": devs})
    print(json.dumps({"platforms": out}))
    return 0


def write_vendors_dir(folder: str, known: "Sequence[Tuple[str, str]]" = ()) -> int:
    """`opencl_child.py --vendors-dir FOLDER [LIB=ICD ...]`: write into FOLDER (which exists) the .icd
    files that give an ICD loader reading only OCL_ICD_VENDORS what this environment names (its vendors
    folder and OCL_ICD_FILENAMES); the device check's fix for a loader that ignores OCL_ICD_FILENAMES.
    Each known vendor ICD library (LIB, written as ICD: knowledge/opencl_loaders.json vendor_icds) that
    the dynamic loader opens here and no entry names is added too: the NVIDIA container toolkit mounts
    libnvidia-opencl.so.1 without the nvidia.icd NVIDIA's own images write."""
    env = dict(os.environ)
    if os.path.normpath(env.get("OCL_ICD_VENDORS") or "") == os.path.normpath(folder):
        env.pop("OCL_ICD_VENDORS")  # the folder being written is not a source of itself
    if icd_vendors_dir(env, folder) is None:  # no OCL_ICD_FILENAMES: the vendors folder's own entries
        vendors = env.get("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
        for n in sorted(os.listdir(vendors)) if os.path.isdir(vendors) else []:
            if n.endswith(".icd"):
                shutil.copyfile(os.path.join(vendors, n), os.path.join(folder, n))
    added = []
    named = set()
    for n in os.listdir(folder):
        if n.endswith(".icd"):
            try:
                with open(os.path.join(folder, n), "r") as fh:
                    lib = fh.read().strip()
            except OSError:
                continue
            named.add(_stem(lib))
            named.add(_library_key(lib))
    for lib, icd in known:
        if _stem(lib) in named or os.path.exists(os.path.join(folder, icd)):
            continue
        key = _library_key(lib)
        if key[0] != "handle" or key in named:  # it does not load here, or an entry names its file
            continue
        with open(os.path.join(folder, icd), "w") as fh:
            fh.write(lib + "\n")
        named.add(key)
        added.append(icd)
    print(json.dumps({"vendors_dir": folder, "files": sorted(os.listdir(folder)), "added": added}))
    return 0


def _stem(lib: str) -> str:
    """`libnvidia-opencl.so.1`, `/usr/lib/libnvidia-opencl.so.580.159.04` -> `libnvidia-opencl`."""
    return os.path.basename(lib).split(".so")[0]


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--vendors-dir":
        sys.exit(write_vendors_dir(sys.argv[2], [(a.split("=", 1)[0], a.split("=", 1)[1]) for a in sys.argv[3:] if "=" in a]))
    sys.exit(main())
