# Runs in a child process (python path/to/opencl_child.py): enumerate OpenCL through pyopencl
# and print one JSON document. Standard library + pyopencl only; Python 3.7 compatible.
# Kept out of the scan process because an OpenCL driver can hang or crash it.
import json
import os
import shutil
import sys
import tempfile


def _get(dev, attr):
    try:
        return getattr(dev, attr)
    except Exception:
        return None


def main():
    # PoCL writes a kernel cache under ~/.cache/pocl when it initialises; a scan must not write to
    # the user's home, so unless the user chose a cache dir, it gets a temporary one.
    tmp_cache = None
    if "POCL_CACHE_DIR" not in os.environ:
        tmp_cache = tempfile.mkdtemp(prefix="mlprobe-pocl-")
        os.environ["POCL_CACHE_DIR"] = tmp_cache
    try:
        return _enumerate()
    finally:
        if tmp_cache:
            shutil.rmtree(tmp_cache, ignore_errors=True)


def _enumerate():
    try:
        import pyopencl as cl
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
    out = []
    for p in platforms:
        devs = []
        try:
            devices = p.get_devices()
        except Exception:
            devices = []
        for d in devices:
            ext = _get(d, "extensions") or ""
            dtype = _get(d, "type")
            try:
                tname = cl.device_type.to_string(dtype) if dtype is not None else None
            except Exception:
                tname = str(dtype)
            board = None
            if "cl_amd_device_attribute_query" in ext:
                board = _get(d, "board_name_amd")
            devs.append({
                "name": (_get(d, "name") or "").strip() or None,
                "type": tname,
                "vendor": (_get(d, "vendor") or "").strip() or None,
                "vendor_id": _get(d, "vendor_id"),
                "driver_version": _get(d, "driver_version"),
                "version": _get(d, "version"),
                "opencl_c_version": _get(d, "opencl_c_version"),
                "compute_units": _get(d, "max_compute_units"),
                "global_memory_bytes": _get(d, "global_mem_size"),
                "host_unified_memory": bool(_get(d, "host_unified_memory")),
                "fp16": "cl_khr_fp16" in ext,
                "fp64": "cl_khr_fp64" in ext or bool(_get(d, "double_fp_config")),
                "board_name": board,
            })
        out.append({"name": p.name, "vendor": p.vendor, "version": p.version, "devices": devs})
    print(json.dumps({"platforms": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
