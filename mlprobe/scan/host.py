"""The one place that touches the machine.

`LiveHost` runs argv lists (never a shell) with a timeout, reads files, env and platform.
`ReplayHost` serves a capture bundle (a folder, or a report JSON that embeds one).
Probes only call `host.get(name)`, `host.env(name)` and `host.info()`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from .capture import (
    SPECS,
    BundleError,
    Capture,
    CaptureSpec,
    UnreadableFile,
    decode,
    read_regular,
    short,
    spec,
)
from .live import _early
from .live.proc import OutputCapped, finish_argv, run_argv

# Environment variables that probes and rules read; captured into host.json so that a replay
# sees the same ones. Values that look like secrets never appear here: these are all settings.
ENV_VARS = (
    "HSA_OVERRIDE_GFX_VERSION",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "PLAIDML_DEVICE_IDS",
    "PLAIDML_EXPERIMENTAL",
    "OCL_ICD_VENDORS",
    "OCL_ICD_FILENAMES",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "WSL_DISTRO_NAME",
    "WSL_INTEROP",
    # read by `mlprobe doctor`: the library search path, container and visibility settings
    "LD_LIBRARY_PATH",
    "GPU_DEVICE_ORDINAL",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "JAX_PLATFORMS",
    "KUBERNETES_SERVICE_HOST",
    "container",
    "SYSTEM_VERSION_COMPAT",
)
OVERRIDE_PREFIX = "MLPROBE_OVERRIDE_"
_SYSTEM = {"linux": "Linux", "darwin": "Darwin", "win32": "Windows", "cygwin": "Windows"}.get(
    sys.platform, "Linux" if sys.platform.startswith("linux") else sys.platform)


class LiveHost:
    """This machine. Every capture is taken at most once (cached), even when several probes
    ask for it concurrently."""

    kind = "live"

    def __init__(self, timeout_scale: float = 1.0, env: Optional[Mapping[str, str]] = None) -> None:
        self._cache: Dict[str, Capture] = {}
        self._locks: Dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._timeout_scale = timeout_scale
        self._env: Mapping[str, str] = env if env is not None else os.environ
        self._info: Optional[Dict[str, Any]] = None
        self._info_lock = threading.Lock()
        self._inflight: Dict[str, float] = {}  # capture name -> when it started (for progress lines)
        self._threads: List[threading.Thread] = []
        self._tools_closed: Optional[str] = None  # why no tool is started any more (the scan's deadline)

    def close_tools(self, why: str) -> None:
        """From now on no tool is started for this host (its captures say why): a scan that passed its
        deadline is over, and what asks later (doctor, report) must not start the hung tools again."""
        self._tools_closed = why

    def pending(self) -> Dict[str, float]:
        """Captures being taken now, with the seconds each has taken so far."""
        now = time.perf_counter()
        return {n: now - t for n, t in list(self._inflight.items())}

    def prefetch(self, names: Iterable[str]) -> None:
        """Start taking slow captures now, in background threads (results land in the cache)."""
        for name in names:
            t = threading.Thread(target=self.get, args=(name,), daemon=True, name=f"prefetch-{name}")
            self._threads.append(t)
            t.start()

    def threads(self) -> List[threading.Thread]:
        """The prefetch threads this host started (a scan past its deadline gives them up)."""
        return [t for t in self._threads if t.is_alive()]

    # -- Host protocol -------------------------------------------------------------------
    def env(self, name: str) -> Optional[str]:
        return self._env.get(name)

    def env_overrides(self) -> Dict[str, str]:
        return {k: v for k, v in self._env.items() if k.startswith(OVERRIDE_PREFIX)}

    def info(self) -> Dict[str, Any]:
        # Every probe asks for it as it starts: computed once, the others wait for that one.
        with self._info_lock:
            if self._info is None:
                self._info = _live_host_info(self._env)
            return self._info

    def get(self, name: str) -> Capture:
        with self._guard:
            if name in self._cache:
                return self._cache[name]
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name in self._cache:
                return self._cache[name]
            started = time.perf_counter()
            self._inflight[name] = started
            try:
                cap = self._take(spec(name))
            finally:
                self._inflight.pop(name, None)
            cap = Capture(cap.name, cap.status, cap.data, cap.error, time.perf_counter() - started)
            with self._guard:
                self._cache[name] = cap
            return cap

    # -- taking captures -----------------------------------------------------------------
    def _take(self, s: CaptureSpec) -> Capture:
        system = _SYSTEM
        if system not in s.systems:
            return Capture(s.name, "absent", error=f"not taken on {system}")
        if s.argv is not None:
            argv = list(s.argv)
            if shutil.which(argv[0], path=self._env.get("PATH")) is None:
                for alt in s.alt_paths:
                    if os.path.isfile(alt) and os.access(alt, os.X_OK):
                        argv[0] = alt
                        break
            return self.run(s.name, argv, s.timeout * self._timeout_scale, s.ok_codes, s.max_bytes)
        if s.path is not None:
            return self.read_file(s.name, s.path, s.max_bytes)
        if s.internal is not None:
            producer = _INTERNAL.get(s.internal)
            if producer is None:
                return Capture(s.name, "absent", error="only read from bundles")
            try:
                return producer(self, s)
            except Exception as exc:  # a producer bug must cost only this capture
                return Capture(s.name, "error", error=short(f"{type(exc).__name__}: {exc}"))
        return Capture(s.name, "absent")

    def run(
        self,
        name: str,
        argv: list[str],
        timeout: float,
        ok_codes: Iterable[int] = (0,),
        max_bytes: int = 8 * 1024 * 1024,
    ) -> Capture:
        exe = shutil.which(argv[0], path=self._env.get("PATH"))
        if exe is None:
            # An absent tool costs a PATH lookup, not a subprocess.
            return Capture(name, "absent", error=f"{argv[0]} not found on PATH")
        if self._tools_closed:
            return Capture(name, "timeout", error=f"{argv[0]} not started: {self._tools_closed}")
        # The same run, started before the probes (scan/live/_early.py): this host's environment is
        # the process's, so it is the run this call would start, only earlier.
        early = _early.take_command(name, [exe] + argv[1:]) if self._env is os.environ else None
        try:
            if early is not None:
                started, began = early
                returncode, stdout, stderr = finish_argv(started, max(0.1, timeout - (time.perf_counter() - began)),
                                                         max_bytes)
            else:
                returncode, stdout, stderr = run_argv([exe] + argv[1:], timeout, dict(self._env),
                                                      max_bytes=max_bytes)
        except OutputCapped as capped:
            # stopped at the cap: what a parser can read is in its head (the scan says it was cut)
            return Capture(name, "ok", data=capped.stdout,
                           error=f"{argv[0]} printed more than {max_bytes} bytes; it was stopped there "
                                 f"and the first {max_bytes} bytes are read")
        except subprocess.TimeoutExpired:
            return Capture(name, "timeout", error=f"{argv[0]} did not finish within {timeout:g} s")
        except OSError as exc:
            return Capture(name, "error", error=short(f"could not run {argv[0]}: {exc}"))
        proc = subprocess.CompletedProcess(argv, returncode, stdout, stderr)
        data = proc.stdout[:max_bytes]
        if proc.returncode not in tuple(ok_codes):
            detail = decode(proc.stderr).strip() or decode(proc.stdout).strip()
            return Capture(
                name,
                "error",
                data=data or None,
                error=short(f"{argv[0]} exited with status {proc.returncode}: {detail}"),
            )
        return Capture(name, "ok", data=data)

    def read_file(self, name: str, path: str, max_bytes: int = 8 * 1024 * 1024) -> Capture:
        try:
            return Capture(name, "ok", data=read_regular(path, max_bytes))
        except FileNotFoundError:
            return Capture(name, "absent", error=f"{path} does not exist")
        except UnreadableFile as exc:
            return Capture(name, "error", error=short(str(exc)))


_SHARED: Optional[LiveHost] = None


def shared_live_host() -> LiveHost:
    """The process's LiveHost (so a prefetch started early is used by the scan)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = LiveHost()
    return _SHARED


def _live_host_info(env: Mapping[str, str]) -> Dict[str, Any]:
    import platform

    info: Dict[str, Any] = {
        "system": platform.system(),
        "release": platform.release(),
        "version": platform.version(),
        "machine": platform.machine(),
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "env": {k: env[k] for k in ENV_VARS if k in env},
    }
    if info["system"] == "Linux":
        libc, ver = platform.libc_ver()
        info["libc"] = f"{libc} {ver}".strip() if libc else None
    if info["system"] == "Darwin":
        info["mac_ver"] = platform.mac_ver()[0] or None
    if info["system"] == "Windows":
        info["win32_ver"] = list(platform.win32_ver())
    try:
        import psutil  # type: ignore[import-untyped,unused-ignore]

        vm = psutil.virtual_memory()
        info["memory_total"] = int(vm.total)
        info["memory_available"] = int(vm.available)
    except Exception:  # psutil missing or broken: memory stays unknown
        pass
    from .live.python import live_python_extras

    info.update(live_python_extras())
    return info


# -- internal producers ------------------------------------------------------------------------

Producer = Callable[[LiveHost, CaptureSpec], Capture]


def _json_capture(name: str, doc: Any) -> Capture:
    return Capture(name, "ok", data=json.dumps(doc, indent=2, sort_keys=True).encode())


def _produce_host(host: LiveHost, s: CaptureSpec) -> Capture:
    return _json_capture(s.name, host.info())


def _produce_kfd(host: LiveHost, s: CaptureSpec) -> Capture:
    root = Path("/sys/class/kfd/kfd/topology/nodes")
    if not root.is_dir():
        return Capture(s.name, "absent", error=f"{root} does not exist")
    parts = []
    nodes = sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    for node in nodes:
        try:
            text = (node / "properties").read_text(errors="replace")
        except OSError:
            continue
        parts.append(f"# node {node.name}\n{text}")
    return Capture(s.name, "ok", data="".join(parts).encode())


def _produce_drm(host: LiveHost, s: CaptureSpec) -> Capture:
    """One line per DRM card: `card0 0000:03:00.0 0x1002 0x73df amdgpu` (sysfs, no subprocess)."""
    root = Path("/sys/class/drm")
    if not root.is_dir():
        return Capture(s.name, "absent", error=f"{root} does not exist")
    lines = []
    for card in sorted(root.glob("card[0-9]*")):
        if "-" in card.name:
            continue
        dev = card / "device"
        try:
            vendor = (dev / "vendor").read_text().strip()
            device = (dev / "device").read_text().strip()
        except OSError:
            continue
        try:
            driver = os.path.basename(os.readlink(dev / "driver"))
        except OSError:
            driver = "-"
        try:
            bus = os.path.basename(os.path.realpath(dev))
        except OSError:
            bus = "-"
        lines.append(f"{card.name} {bus} {vendor} {device} {driver}\n")
    if not lines:
        return Capture(s.name, "absent", error="no DRM cards")
    return Capture(s.name, "ok", data="".join(lines).encode())


def _produce_wsl(host: LiveHost, s: CaptureSpec) -> Capture:
    dxg = os.path.exists("/dev/dxg")
    lib = Path("/usr/lib/wsl/lib")
    if not dxg and not lib.is_dir():
        return Capture(s.name, "absent", error="no /dev/dxg and no /usr/lib/wsl/lib")
    libs = sorted(p.name for p in lib.iterdir()) if lib.is_dir() else []
    return _json_capture(s.name, {"dev_dxg": dxg, "wsl_lib": libs})


def _produce_dxdiag(host: LiveHost, s: CaptureSpec) -> Capture:
    import tempfile

    if shutil.which("dxdiag") is None:
        return Capture(s.name, "absent", error="dxdiag not found on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "dxdiag.txt")
        cap = host.run(s.name, ["dxdiag", "/t", out], s.timeout)
        if cap.status != "ok":
            return cap
        return host.read_file(s.name, out)


def _produce_opencl(host: LiveHost, s: CaptureSpec) -> Capture:
    from .live.opencl import live_capture

    return live_capture(host, s)


def _produce_frameworks(host: LiveHost, s: CaptureSpec) -> Capture:
    from .live.frameworks import live_inventory

    return _json_capture(s.name, live_inventory())


def _produce_pip_list(host: LiveHost, s: CaptureSpec) -> Capture:
    cap = host.run(s.name, [sys.executable, "-m", "pip", "list", "--disable-pip-version-check"],
                   s.timeout * host._timeout_scale)
    if cap.status == "ok" and cap.data:
        return cap
    from .live.frameworks import installed_distributions

    lines = [f"{name}=={version}" for name, version in installed_distributions()]
    head = "# the installed distributions of this Python (its dist-info folders: it has no pip to ask)\n"
    return Capture(s.name, "ok", data=(head + "\n".join(lines) + "\n").encode("utf-8"))


def _produce_cpuinfo(host: LiveHost, s: CaptureSpec) -> Capture:
    from .live.cpuinfo import live_cpuinfo

    return live_cpuinfo(s)


def _produce_opencl_icd(host: LiveHost, s: CaptureSpec) -> Capture:
    from .live.opencl_icd import live_opencl_icd

    return live_opencl_icd(s, host._env)


_INTERNAL: Dict[str, Producer] = {
    "host": _produce_host,
    "kfd-topology": _produce_kfd,
    "drm-drivers": _produce_drm,
    "wsl-dxg": _produce_wsl,
    "dxdiag": _produce_dxdiag,
    "opencl": _produce_opencl,
    "frameworks": _produce_frameworks,
    "pip-list": _produce_pip_list,
    "py-cpuinfo": _produce_cpuinfo,
    "opencl-icd": _produce_opencl_icd,
}


def register_producer(internal: str, producer: Producer) -> None:
    """A producer that lives above this layer (the frameworks' device enumeration runs the verify
    payload): the command that wants the capture registers it before taking captures. Until then the
    capture is absent on a live host, as a capture only bundles carry."""
    _INTERNAL[internal] = producer


# -- replay ------------------------------------------------------------------------------------


# The fields of host.json the readers take as they are: each of the type `mlprobe capture` writes.
_HOST_JSON_TYPES: Tuple[Tuple[str, str, Callable[[Any], bool]], ...] = tuple(
    [(k, "a string", lambda v: isinstance(v, str)) for k in (
        "system", "machine", "release", "version", "libc", "python_version", "python_executable",
        "python_implementation")]
    + [("env", "an object", lambda v: isinstance(v, dict)),
       ("python_tags", "an array of strings", lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v))])


class ReplayHost:
    """Serves a capture bundle: a folder of files, or a report JSON with an embedded bundle."""

    kind = "replay"

    def __init__(self, source: "str | os.PathLike[str]") -> None:
        self.source = Path(source)
        self._files: Dict[str, bytes] = {}
        self._folder: Optional[Path] = None
        if self.source.is_dir():
            self._folder = self.source
        elif self.source.is_file():
            self._files = _bundle_from_report(self.source)
        elif os.path.lexists(self.source):
            raise BundleError(f"{self.source} is neither a folder nor a regular file")
        else:
            raise BundleError(f"{self.source} does not exist")
        self._host_json = self._load_host_json()
        # MLPROBE_OVERRIDE_* of the environment mlprobe runs in, applied over the bundle's own (the
        # command layer sets them, as a live scan reads them from the environment)
        self.extra_overrides: Dict[str, str] = {}

    def names(self) -> list[str]:
        """The capture names present: every entry of the folder that is there at all (a symlink or a
        FIFO under a capture's name is present, and reading it is an error, not an absence)."""
        if self._folder is not None:
            import stat

            try:
                return sorted(p.name for p in self._folder.iterdir()
                              if p.name in SPECS or stat.S_ISREG(os.lstat(p).st_mode))
            except OSError:
                return []
        return sorted(self._files)

    def _read(self, name: str) -> Capture:
        """A capture of the bundle: only a regular file inside the folder, capped at the size a
        live capture of that name may have."""
        limit = SPECS[name].max_bytes if name in SPECS else 8 * 1024 * 1024
        if self._folder is None:
            data = self._files.get(name)
            if data is None:
                return Capture(name, "absent", error=f"{name} is not in the bundle")
            return Capture(name, "ok", data=data[:limit])
        try:
            data = read_regular(self._folder / name, limit, follow_symlinks=False)
        except FileNotFoundError:
            return Capture(name, "absent", error=f"{name} is not in the bundle")
        except UnreadableFile as exc:
            return Capture(name, "error", error=short(f"{name}: {exc}"))
        return Capture(name, "ok", data=data)

    def _raw(self, name: str) -> Optional[bytes]:
        cap = self._read(name)
        return cap.data if cap.ok else None

    def get(self, name: str) -> Capture:
        if name not in SPECS:
            spec(name)  # raises a clear KeyError for a typo in a probe
        return self._read(name)

    def _load_host_json(self) -> Dict[str, Any]:
        cap = self._read("host.json")
        if cap.status == "error":
            raise BundleError(f"cannot read host.json in {self.source}: {cap.error}")
        data = cap.data
        if data is None:
            return {}
        try:
            from ..model import jsondoc

            doc = jsondoc.loads(decode(data))
        except (ValueError, RecursionError) as exc:
            raise BundleError(f"host.json in {self.source} is not valid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise BundleError(
                f"host.json in {self.source} is a JSON {type(doc).__name__}, not the object "
                "`mlprobe capture` writes"
            )
        for key, want, ok in _HOST_JSON_TYPES:
            value = doc.get(key)
            if value is not None and not ok(value):
                from ..model.docversion import _type_name

                raise BundleError(f"host.json in {self.source}: `{key}` is {_type_name(value)}, not {want} "
                                  "as `mlprobe capture` writes it (a hand-edited file?)")
        return doc

    def env(self, name: str) -> Optional[str]:
        env = self._host_json.get("env")
        if isinstance(env, dict):
            val = env.get(name)
            return str(val) if val is not None else None
        return None

    def env_overrides(self) -> Dict[str, str]:
        return {**self.bundle_overrides(), **self.extra_overrides}

    def bundle_overrides(self) -> Dict[str, str]:
        """The overrides the bundle itself carries (host.json `env`), without the environment's."""
        env = self._host_json.get("env")
        if not isinstance(env, dict):
            return {}
        return {k: str(v) for k, v in env.items() if k.startswith(OVERRIDE_PREFIX)}

    def info(self) -> Dict[str, Any]:
        info = dict(self._host_json)
        if not info.get("system"):
            info["system"] = self._infer_system()
        return info

    def _infer_system(self) -> Optional[str]:
        names = set(self.names())
        # The KFD topology is Linux's; TheRock lists amd-smi as unsupported on Windows; doctor's
        # captures of /proc (/proc/driver/nvidia/version too), /dev and the loader cache exist only on
        # Linux; uname -a names its kernel.
        if names & {"proc-cpuinfo.txt", "lscpu.txt", "os-release.txt", "rocminfo.txt", "lspci.txt",
                    "kfd-topology.txt", "amd-smi-list.txt", "amd-smi-static.txt", "amd-smi-list.json",
                    "amd-smi-static.json", "proc-version.txt", "ldconfig-p.txt", "ls-l-dev.txt",
                    "proc-1-cgroup.txt", "nv_tegra_release.txt", "device-tree-model.txt",
                    "device-tree-compatible.txt", "proc-driver-nvidia-version.txt"}:
            return "Linux"
        uname = self.get("uname.txt")
        if uname.ok:
            from ..probes.os_ import uname_fields

            kernel = (uname_fields(uname.text()) or [""])[0]
            if kernel in ("Linux", "Darwin"):
                return kernel
        if names & {"sysctl.txt", "sw_vers.txt", "system_profiler-SPDisplaysDataType.txt",
                    "system_profiler-SPDisplaysDataType.json"}:
            return "Darwin"
        if names & {"dxdiag.txt", "Win32_VideoController.json", "Win32_VideoController.txt", "Win32_Processor.json",
                    "Win32_Processor.txt"}:
            return "Windows"
        return None


def _bundle_from_report(path: Path) -> Dict[str, bytes]:
    from ..model import jsondoc
    from ..model.validate import MAX_DOCUMENT_BYTES

    try:
        raw = read_regular(path, MAX_DOCUMENT_BYTES + 1)
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise ValueError(f"it is larger than {MAX_DOCUMENT_BYTES >> 20} MiB")
        doc = jsondoc.loads(raw.decode("utf-8"))
    except jsondoc.BadNumber as exc:
        raise BundleError(f"{path}: {exc}") from None
    except (OSError, UnreadableFile, ValueError, RecursionError) as exc:
        raise BundleError(f"{path} is neither a bundle folder nor a readable JSON report: {exc}") from None
    from ..model.validate import DocumentError, check_capture_files, check_version

    bundle = doc.get("capture_bundle") if isinstance(doc, dict) else None
    try:
        if isinstance(doc, dict):
            check_version(doc, str(path))
        entries = check_capture_files(bundle) if bundle is not None else None
    except DocumentError as exc:
        raise BundleError(f"{path}: {exc}" if not str(exc).startswith(str(path)) else str(exc)) from None
    if entries is None:
        raise BundleError(
            f"{path} holds no capture bundle; make the report with `mlprobe report --include-raw`"
        )
    files: Dict[str, bytes] = {}
    for name, entry in entries.items():
        if isinstance(entry.get("text"), str):
            files[name] = entry["text"].encode("utf-8")
        else:
            try:
                files[name] = base64.b64decode(entry["base64"])
            except ValueError as exc:  # binascii.Error
                raise BundleError(f"{path}: the embedded capture {name} is not valid base64: {exc}") from None
    return files


def open_replay(source: "str | os.PathLike[str]") -> ReplayHost:
    """A ReplayHost for a path a person gave: besides what ReplayHost refuses, a folder (or report)
    that holds no capture file at all is refused, since replaying it would just find nothing."""
    host = ReplayHost(source)
    if not any(name in SPECS for name in host.names()):
        raise BundleError(
            f"{source} holds no capture files (none of the names in docs/CAPTURES.md, such as host.json, "
            "lspci.txt or nvidia-smi-q-x.xml)"
        )
    return host


UNREDACTED_NOTICE = "NOTICE-unredacted.txt"
UNREDACTED_TEXT = (
    "This bundle holds this machine's tool outputs and files exactly as they were read: NOT redacted.\n"
    "Host names, user names, serial numbers, paths, IP and MAC addresses and environment variables may\n"
    "be in it. Before you share it, look through the files, or share the redacted report instead:\n"
    "    mlprobe report --replay THIS-FOLDER\n"
)


def write_bundle(host: LiveHost, folder: Path, names: Optional[Iterable[str]] = None) -> Dict[str, Capture]:
    """Take every capture (concurrently) and write the ones that exist into `folder` (missing, or an
    empty folder), all or nothing: they are written into a folder beside it that is renamed into
    place at the end, so a full disk or a Ctrl-C leaves no partial bundle (no 0-byte file that would
    make the retry refuse a folder that is not empty). The bundle carries a notice that it is not
    redacted (UNREDACTED_NOTICE)."""
    import shutil
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    wanted = list(names) if names is not None else [n for n, s in SPECS.items() if s.internal != "never"]
    folder = Path(os.path.abspath(folder))
    folder.parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=8) as pool:
        caps = dict(zip(wanted, pool.map(host.get, wanted)))
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
    try:
        files = {name: cap.data for name, cap in caps.items()
                 # Only what succeeded is written: a replay then sees a failed capture as absent.
                 if cap.data is not None and cap.status == "ok"}
        files[UNREDACTED_NOTICE] = UNREDACTED_TEXT.encode("utf-8")
        for name, data in files.items():
            with open(staging / name, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        if folder.exists():
            folder.rmdir()  # empty (the caller checked); a file put there since makes this fail
        os.rename(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return caps
