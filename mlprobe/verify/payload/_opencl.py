# mypy: ignore-errors
# The payload's `opencl-loader NAME` mode: open the ICD loader NAME the way a framework that dlopens it
# by name does (PlaidML opens "libOpenCL.so"), in this environment, and say which file the dynamic
# linker gave, whether that file reads OCL_ICD_FILENAMES, and the platforms and devices it lists.
# One name per process: two loaders in one process would share their ICDs.
# Standard library only; Python 3.7 compatible (see __main__.py).
import os

from ._harness import emit, short_error

_CL_NAME, _CL_VENDOR, _CL_VERSION = 0x0902, 0x0903, 0x0901
_CL_DEV_NAME, _CL_DEV_VENDOR, _CL_DEV_TYPE = 0x102B, 0x102C, 0x1000
_CL_TYPES = {1: "DEFAULT", 2: "CPU", 4: "GPU", 8: "ACCELERATOR", 16: "CUSTOM"}


def _loaded_from(ctypes, lib, symbol):
    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        info = DlInfo()
        addr = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
        if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    except Exception:
        pass
    return getattr(lib, "_name", None)


def _cl_string(ctypes, fn, handle, param):
    size = ctypes.c_size_t(0)
    if fn(handle, param, 0, None, ctypes.byref(size)) != 0 or size.value > 65536:
        return None
    buf = ctypes.create_string_buffer(size.value or 1)
    if fn(handle, param, size, buf, None) != 0:
        return None
    return buf.value.decode("utf-8", "replace").strip()


def _icd_files(folder):
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        return None, short_error(exc)
    for n in names:
        if not n.endswith(".icd"):
            continue
        path = os.path.join(folder, n)
        try:
            with open(path, "rb") as fh:
                text = fh.read(4096).decode("utf-8", "replace")
            out.append({"file": n, "library": text.strip().splitlines()[0].strip() if text.strip() else ""})
        except (OSError, IndexError) as exc:
            out.append({"file": n, "library": None, "error": short_error(exc)})
    return out, None


def mode_opencl_loader(name):
    import ctypes
    env = {k: os.environ.get(k) for k in ("OCL_ICD_FILENAMES", "OCL_ICD_VENDORS", "LD_LIBRARY_PATH",
                                          "OPENCL_VENDOR_PATH") if os.environ.get(k) is not None}
    vendors = os.environ.get("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
    files, ferr = _icd_files(vendors) if os.path.isdir(vendors) else (None, "not a folder")
    rec = {"event": "opencl_loader", "name": name, "env": env, "vendors_dir": vendors, "icd_files": files,
           "vendors_error": ferr, "path": None, "error": None, "reads_ocl_icd_filenames": None,
           "platforms": None}
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        rec["error"] = short_error(exc)
        emit(rec)
        return 0
    path = _loaded_from(ctypes, lib, "clGetPlatformIDs")
    rec["path"] = os.path.realpath(path) if path else None
    try:
        with open(rec["path"], "rb") as fh:
            rec["reads_ocl_icd_filenames"] = b"OCL_ICD_FILENAMES" in fh.read(64 << 20)
    except (OSError, TypeError):
        pass
    emit(dict(rec, event="tick"))
    n = ctypes.c_uint(0)
    rc = lib.clGetPlatformIDs(0, None, ctypes.byref(n))
    plats = []
    if rc == 0 and 0 < n.value <= 64:
        ids = (ctypes.c_void_p * n.value)()
        lib.clGetPlatformIDs(n.value, ids, None)
        pinfo, dinfo = lib.clGetPlatformInfo, lib.clGetDeviceInfo
        pinfo.argtypes = dinfo.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p,
                                           ctypes.POINTER(ctypes.c_size_t)]
        lib.clGetDeviceIDs.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint,
                                       ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint)]
        for pid in ids:
            p = {"name": _cl_string(ctypes, pinfo, pid, _CL_NAME), "vendor": _cl_string(ctypes, pinfo, pid, _CL_VENDOR),
                 "version": _cl_string(ctypes, pinfo, pid, _CL_VERSION), "devices": []}
            dn = ctypes.c_uint(0)
            if lib.clGetDeviceIDs(pid, 0xFFFFFFFF, 0, None, ctypes.byref(dn)) == 0 and 0 < dn.value <= 256:
                dids = (ctypes.c_void_p * dn.value)()
                lib.clGetDeviceIDs(pid, 0xFFFFFFFF, dn.value, dids, None)
                for did in dids:
                    t = ctypes.c_uint64(0)
                    dinfo(did, _CL_DEV_TYPE, ctypes.sizeof(t), ctypes.byref(t), None)
                    kinds = [v for k, v in sorted(_CL_TYPES.items()) if t.value & k]
                    p["devices"].append({"name": _cl_string(ctypes, dinfo, did, _CL_DEV_NAME),
                                         "vendor": _cl_string(ctypes, dinfo, did, _CL_DEV_VENDOR),
                                         "type": kinds[0] if kinds else None})
            plats.append(p)
    elif rc != 0:
        rec["platforms_error"] = "clGetPlatformIDs returned %d" % rc
    rec["platforms"] = plats
    emit(rec)
    return 0
