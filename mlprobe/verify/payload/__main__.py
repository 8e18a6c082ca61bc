# mypy: ignore-errors
# mlprobe verify payload. Runs in the TARGET interpreter as a child process (mlprobe/verify/child.py):
#   python payload/__main__.py discover
#   python payload/__main__.py run '<json config>'
#   python payload/__main__.py opencl-loader NAME     (which ICD loader NAME is, and what it lists)
# Standard library + the framework under test only (numpy only where the framework itself needs it:
# TensorFlow, Keras/PlaidML, JAX). Python 3.7 compatible: no walrus, no positional-only parameters, no
# `from __future__ import annotations`, no typing at runtime.
#
# The files beside this one: _harness.py (protocol, settings, data, statistics, stages), _numpy_ref.py,
# _opencl.py (the opencl-loader mode) and one file per backend, named by the framework (torch.py,
# tensorflow.py, jax.py, plaidml.py), each with a `Backend` class (info, devices, correctness,
# learning, speed, proof). A run loads the harness and the one backend its config names. Run as a
# script, the folder is not left on sys.path and the files are loaded as the private package
# `_mlprobe_payload`: no file here can shadow a module of the target (its `import torch` is torch).
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
        sys.path.pop(0)  # don't let files beside the payload shadow the target's modules
    sys.dont_write_bytecode = True  # leave no cache of the target's Python in mlprobe's folder
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "_mlprobe_payload", os.path.join(_HERE, "__init__.py"), submodule_search_locations=[_HERE])
    _pkg = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _pkg
    _spec.loader.exec_module(_pkg)
    PACKAGE = _spec.name
else:
    PACKAGE = __package__

import importlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

H = importlib.import_module(PACKAGE + "._harness")

# What discover looks for besides the backends: (modules that must import, distributions for the version).
EXTRAS = {
    "torch_directml": (("torch_directml",), ("torch-directml",)),
    "keras": (("keras",), ("keras", "Keras")),
    "numpy": (("numpy",), ("numpy",)),
}


def backend_names():
    """The backends are the files beside this one that are not the harness (no list to keep)."""
    names = []
    for fn in sorted(os.listdir(_HERE)):
        if fn.endswith(".py") and not fn.startswith("_"):
            names.append(fn[:-3])
    return names


def load_backend(name):
    if name not in backend_names():
        raise RuntimeError("the verify payload has no backend %r (it has: %s)" % (name, ", ".join(backend_names())))
    return importlib.import_module(PACKAGE + "." + name)


def mode_discover(cfg):
    """Which frameworks import here (find_spec, nothing imported) and their versions. The config may
    name the frameworks to look for; by default every backend."""
    found = {}
    for key in cfg.get("frameworks") or backend_names():
        if key not in backend_names():
            found[key] = {"importable": False, "version": None, "error": "the payload has no backend for it"}
            continue
        mod = load_backend(key)
        mods, dists = mod.MODULES, mod.DISTS
        ok = all(H.find_spec(m) for m in mods)
        rec = {"importable": ok, "version": H.dist_version(*dists) if ok else None}
        if hasattr(mod, "discover_extra"):
            rec.update(mod.discover_extra(ok))
        found[key] = rec
    for key, (mods, dists) in EXTRAS.items():
        ok = all(H.find_spec(m) for m in mods)
        found[key] = {"importable": ok, "version": H.dist_version(*dists) if ok else None}
    H.emit({"event": "discover", "python": sys.version.split()[0], "executable": sys.executable,
            "prefix": sys.prefix,
            "implementation": platform.python_implementation(), "platform": sys.platform,
            "machine": platform.machine(), "cpu_count": os.cpu_count(), "frameworks": found,
            "protocol": H.PROTOCOL})
    return 0


def die_with_parent(parent_pid):
    """Linux: ask the kernel to kill this process when the runner dies. A gated child may be paused
    (SIGSTOP) while another times; paused, it could not notice a `kill -9` of the runner itself."""
    if not sys.platform.startswith("linux") or not parent_pid:
        return
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        return
    if os.getppid() != int(parent_pid):  # the runner died before the request took hold
        os._exit(137)


def mode_run(cfg):
    fw = cfg["framework"]
    if cfg.get("gated"):
        die_with_parent(cfg.get("parent_pid"))
    H.inject(cfg, "*", "import")
    t0 = time.time()
    try:
        backend = load_backend(fw).Backend(cfg)
    except Exception as exc:
        H.emit({"event": "fatal", "stage": "import", "error": H.short_error(exc),
                "traceback": traceback.format_exc()[-2000:]})
        return 0
    H.emit({"event": "hello", "framework": fw, "version": backend.version, "import_s": round(time.time() - t0, 3),
            "python": sys.version.split()[0], "info": H.safe(backend.info)})
    H.inject(cfg, "*", "devices")
    try:
        found, missing = backend.devices()
    except Exception as exc:
        H.emit({"event": "fatal", "stage": "devices", "error": H.short_error(exc),
                "traceback": traceback.format_exc()[-2000:]})
        return 0
    requested = cfg.get("devices")
    todo = [d for d in found if H.wanted(d, requested)]
    if cfg.get("cpu_baseline") and todo and not any(d["kind"] == "cpu" for d in todo):
        todo = [d for d in found if d["kind"] == "cpu"][:1] + todo  # the CPU is the baseline
    H.emit({"event": "devices", "devices": found, "unavailable": missing, "todo": [d["id"] for d in todo]})
    if cfg.get("enumerate_only"):
        H.emit({"event": "done"})
        return 0
    if getattr(backend, "one_device_per_process", False):
        todo = todo[:1]  # the runner starts one process per device (PlaidML)
        if todo:
            backend.open(todo[0]["id"])
    only_speed = cfg.get("speed_only")
    for dev in todo:
        if only_speed:
            H.emit({"event": "stage", "device": dev["id"], "stage": "speed"})
            try:
                rec = backend.speed(dev, H.inject(cfg, dev["id"], "speed"))
            except Exception as exc:
                rec = {"error": H.short_error(exc)}
            H.emit({"event": "result", "device": dev["id"], "stage": "speed", "data": rec})
            H.emit({"event": "device_done", "device": dev["id"], "data": {"device": dev["id"], "speed": rec}})
        else:
            H.run_device(cfg, backend, dev)
    H.emit({"event": "done"})
    return 0


def mode_libraries(cfg):
    """Import the frameworks `cfg["frameworks"]` names, in that order, list each one's devices, then
    say which shared libraries the process had loaded (one `libraries` event)."""
    libs = importlib.import_module(PACKAGE + "._libraries")
    devices = {}
    error = None
    for fw in cfg.get("frameworks") or []:
        try:
            backend = load_backend(fw).Backend(H.settings({"framework": fw, "quick": True}))
            found, _missing = backend.devices()
            devices[fw] = [d.get("id") for d in found]
        except Exception as exc:
            error = "%s: %s" % (fw, H.short_error(exc))
            break
    try:
        paths, method = libs.loaded_libraries()
    except Exception as exc:
        paths, method = [], None
        error = error or "listing the loaded libraries: %s" % H.short_error(exc)
    env = dict((k, os.environ.get(k)) for k in ("LD_LIBRARY_PATH", "LD_PRELOAD", "CONDA_PREFIX", "CUDA_HOME",
                                                 "DYLD_LIBRARY_PATH", "PATH") if os.environ.get(k) is not None)
    import site
    try:
        sites = list(site.getsitepackages())
    except Exception:
        sites = []
    try:
        user_site = site.getusersitepackages()
        if user_site:
            sites.append(user_site)
    except Exception:
        pass
    H.emit({"event": "libraries", "frameworks": list(cfg.get("frameworks") or []), "paths": paths,
            "method": method, "devices": devices, "error": error, "prefix": sys.prefix,
            "site_packages": [p for p in sites if os.path.isdir(p)], "env": env})
    return 0


def main(argv):
    H.open_channel()
    mode = argv[1] if len(argv) > 1 else "discover"
    if mode == "opencl-loader":
        return importlib.import_module(PACKAGE + "._opencl").mode_opencl_loader(
            argv[2] if len(argv) > 2 else "libOpenCL.so")
    try:
        given = json.loads(argv[2]) if len(argv) > 2 else {}
        if mode == "discover":
            return mode_discover(given)
        if mode == "libraries":
            return mode_libraries(given)
        return mode_run(H.settings(given))
    except Exception as exc:
        H.emit({"event": "fatal", "stage": mode, "error": H.short_error(exc),
                "traceback": traceback.format_exc()[-2000:]})
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
