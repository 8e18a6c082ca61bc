"""Capture names (see docs/CAPTURES.md) and how each one is taken on a live machine.

A capture is raw bytes: a command's stdout, a file's content, or (for the few things only Python
can read cheaply, like installed distributions) a JSON document mlprobe produces itself. Probes
ask a Host for captures by name and never touch the machine themselves.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Any, Dict, Optional, Protocol, Tuple


@dataclass(frozen=True)
class CaptureSpec:
    name: str  # the file name inside a bundle
    argv: Optional[Tuple[str, ...]] = None  # a command to run
    path: Optional[str] = None  # a file to read
    internal: Optional[str] = None  # a producer inside mlprobe (host.py knows them)
    systems: Tuple[str, ...] = ("Linux", "Darwin", "Windows")
    timeout: float = 5.0
    # Some tools exit non-zero on success (or print useful stdout on failure).
    ok_codes: Tuple[int, ...] = (0,)
    max_bytes: int = 8 * 1024 * 1024
    # Where the tool lives when its installer did not put it on PATH (checked with os.access,
    # no subprocess).
    alt_paths: Tuple[str, ...] = ()


_PS = ("powershell", "-NoProfile", "-NonInteractive", "-Command")

SPECS: Dict[str, CaptureSpec] = {
    s.name: s
    for s in (
        CaptureSpec("host.json", internal="host"),
        CaptureSpec("proc-cpuinfo.txt", path="/proc/cpuinfo", systems=("Linux",)),
        CaptureSpec("lscpu.txt", argv=("lscpu",), systems=("Linux",)),
        CaptureSpec("os-release.txt", path="/etc/os-release", systems=("Linux",)),
        CaptureSpec("proc-version.txt", path="/proc/version", systems=("Linux",)),
        CaptureSpec("uname.txt", argv=("uname", "-a"), systems=("Linux", "Darwin")),
        CaptureSpec("sysctl.txt", argv=("sysctl", "machdep.cpu", "hw"), systems=("Darwin",)),
        CaptureSpec("sw_vers.txt", argv=("sw_vers",), systems=("Darwin",)),
        CaptureSpec("nvidia-smi-q-x.xml", argv=("nvidia-smi", "-q", "-x"), timeout=10.0),
        CaptureSpec(
            "nvidia-smi-query.csv",
            argv=(
                "nvidia-smi",
                "--query-gpu=name,driver_version,compute_cap,memory.total,pci.bus_id,uuid",
                "--format=csv",
            ),
            timeout=10.0,
        ),
        CaptureSpec("nvidia-smi.txt", argv=("nvidia-smi",), timeout=10.0),
        # `nvidia-smi -L`: one line per GPU and, under a MIG-enabled GPU, one per MIG device (its profile
        # and MIG- UUID), the names a job's CUDA_VISIBLE_DEVICES takes.
        CaptureSpec("nvidia-smi-L.txt", argv=("nvidia-smi", "-L"), timeout=10.0),
        # How the GPUs reach each other (NVLink, PCIe), and their CPU/NUMA affinity.
        CaptureSpec("nvidia-smi-topo-m.txt", argv=("nvidia-smi", "topo", "-m"), timeout=10.0),
        # `nvidia-smi -q` (text): full names where the plain table truncates them.
        CaptureSpec("nvidia-smi-q.txt", argv=("nvidia-smi", "-q"), timeout=10.0),
        CaptureSpec(
            "proc-driver-nvidia-version.txt", path="/proc/driver/nvidia/version", systems=("Linux",)
        ),
        # ROCm's installers leave /opt/rocm/bin off PATH.
        CaptureSpec("rocminfo.txt", argv=("rocminfo",), systems=("Linux",), timeout=10.0,
                    alt_paths=("/opt/rocm/bin/rocminfo",)),
        CaptureSpec(
            "rocm-smi.txt", argv=("rocm-smi", "--showproductname"), systems=("Linux",), timeout=10.0,
            alt_paths=("/opt/rocm/bin/rocm-smi",),
        ),
        CaptureSpec("rocm-version.txt", path="/opt/rocm/.info/version", systems=("Linux",)),
        # -- AMD: amd-smi, rocm-smi's successor (Linux only: TheRock lists amdsmi as unsupported on
        # Windows). The --json forms carry the same fields; a pip-installed ROCm puts amd-smi in the
        # venv's bin, which is on PATH when that venv is active.
        *(CaptureSpec(f"amd-smi-{sub}.{ext}", argv=("amd-smi", sub) + (("--json",) if ext == "json" else ()),
                      systems=("Linux",), timeout=15.0, alt_paths=("/opt/rocm/bin/amd-smi",))
          for sub in ("list", "static") for ext in ("txt", "json")),
        CaptureSpec("kfd-topology.txt", internal="kfd-topology", systems=("Linux",)),
        CaptureSpec("lspci.txt", argv=("lspci", "-nn"), systems=("Linux",)),
        CaptureSpec("drm-drivers.txt", internal="drm-drivers", systems=("Linux",)),
        CaptureSpec("clinfo.txt", argv=("clinfo",), timeout=10.0),
        CaptureSpec("clinfo.json", argv=("clinfo", "--json"), timeout=10.0),
        CaptureSpec(
            "system_profiler-SPDisplaysDataType.txt",
            argv=("system_profiler", "SPDisplaysDataType"),
            systems=("Darwin",),
            timeout=15.0,
        ),
        CaptureSpec(
            "system_profiler-SPDisplaysDataType.json",
            argv=("system_profiler", "-json", "SPDisplaysDataType"),
            systems=("Darwin",),
            timeout=15.0,
        ),
        CaptureSpec(
            "Win32_VideoController.json",
            argv=_PS + ("Get-CimInstance Win32_VideoController | ConvertTo-Json",),
            systems=("Windows",),
            timeout=20.0,
        ),
        CaptureSpec("dxdiag.txt", internal="dxdiag", systems=("Windows",), timeout=60.0),
        CaptureSpec("wsl-dxg.json", internal="wsl-dxg", systems=("Linux",)),
        # What `mlprobe doctor` reads besides the scan: the GPU device nodes with their modes and
        # groups (ls exits 2 when /dev/dri is missing and still lists /dev), who this user is, the
        # container markers, the dynamic loader's cache, the OpenCL loader and ICD files.
        CaptureSpec("ls-l-dev.txt", argv=("ls", "-l", "/dev", "/dev/dri"), systems=("Linux",),
                    ok_codes=(0, 1, 2)),
        CaptureSpec("id.txt", argv=("id",), systems=("Linux", "Darwin")),
        CaptureSpec("dockerenv.txt", path="/.dockerenv", systems=("Linux",), max_bytes=64 * 1024),
        CaptureSpec("run-containerenv.txt", path="/run/.containerenv", systems=("Linux",), max_bytes=64 * 1024),
        CaptureSpec("proc-1-cgroup.txt", path="/proc/1/cgroup", systems=("Linux",), max_bytes=256 * 1024),
        CaptureSpec("ldconfig-p.txt", argv=("ldconfig", "-p"), systems=("Linux",),
                    alt_paths=("/sbin/ldconfig", "/usr/sbin/ldconfig")),
        CaptureSpec("opencl-icd.json", internal="opencl-icd", systems=("Linux",), timeout=10.0),
        # The frameworks' own device enumeration in the scanning Python (a child per framework).
        CaptureSpec("framework-devices.json", internal="framework-devices", timeout=120.0),
        # What the frameworks' processes really loaded (doctor/libraries.py): mlprobe's own document,
        # or lines a person pasted (/proc/PID/maps, lsof, ldd, LD_DEBUG); the venv's settings at a
        # plain and an activated start of its Python (doctor/starts.py)
        CaptureSpec("loaded-libraries.json", internal="loaded-libraries", timeout=180.0),
        CaptureSpec("loaded-libraries.txt", internal="loaded-libraries-text"),
        CaptureSpec("interpreter-starts.json", internal="interpreter-starts", timeout=60.0),
        # lsusb exits 1 when it lists no device (no USB bus, e.g. in a VM): that is an answer, not a failure.
        CaptureSpec("usb-devices.txt", argv=("lsusb",), systems=("Linux",), ok_codes=(0, 1)),
        CaptureSpec("mlprobe-opencl.json", internal="opencl", timeout=10.0),
        CaptureSpec("mlprobe-frameworks.json", internal="frameworks"),
        # `python -m pip list` of the scanning Python (what `bundle --reuse-installed` leaves out):
        # pip's own list where this Python has pip, else its dist-info folders as name==version lines
        CaptureSpec("pip-list.txt", internal="pip-list", timeout=60.0),
        # py-cpuinfo's get_cpu_info(), as JSON: the CPU source where /proc/cpuinfo, lscpu and sysctl
        # are not (Windows); the CPU probe asks for it only then
        CaptureSpec("py-cpuinfo.json", internal="py-cpuinfo", timeout=20.0),
        # -- Intel oneAPI tools (one block) --
        # oneAPI's device list (every backend) and Intel's GPU manager; both list Intel GPUs that
        # the DRM cards (Linux only) cannot name, on Windows too.
        CaptureSpec("sycl-ls.txt", argv=("sycl-ls",), timeout=20.0,
                    alt_paths=("/opt/intel/oneapi/compiler/latest/bin/sycl-ls",)),
        # Huawei Ascend: the driver's tool, and the CANN toolkit's install record (its folder is named
        # for the machine's architecture, as platform.machine() says it: x86_64, aarch64).
        CaptureSpec("npu-smi-info.txt", argv=("npu-smi", "info"), systems=("Linux",), timeout=10.0,
                    alt_paths=("/usr/local/sbin/npu-smi",)),
        CaptureSpec("ascend-toolkit-install-info.txt", systems=("Linux",),
                    path=f"/usr/local/Ascend/ascend-toolkit/latest/{platform.machine()}-linux/ascend_toolkit_install.info"),
        CaptureSpec("xpu-smi-discovery.txt", argv=("xpu-smi", "discovery"), systems=("Linux", "Windows"),
                    timeout=20.0),
        # -- CPUs known by name, and NVIDIA Jetson / Tegra boards (one block) --
        # WMI's Win32_Processor: the CPU's name, vendor, cores and threads on Windows (no SIMD flags);
        # the CPU probe reads py-cpuinfo live, so this is read from bundles where nothing else names the CPU.
        CaptureSpec(
            "Win32_Processor.json",
            argv=_PS + ("Get-CimInstance Win32_Processor | Select-Object Name,Manufacturer,Caption,Architecture,"
                        "AddressWidth,NumberOfCores,NumberOfLogicalProcessors | ConvertTo-Json",),
            systems=("Windows",),
            timeout=20.0,
        ),
        CaptureSpec("Win32_Processor.txt", internal="never"),  # `wmic cpu get /format:list`, pasted
        # Jetson/Tegra (no nvidia-smi): the L4T release file and the device tree's board names.
        CaptureSpec("nv_tegra_release.txt", path="/etc/nv_tegra_release", systems=("Linux",)),
        CaptureSpec("device-tree-model.txt", path="/proc/device-tree/model", systems=("Linux",)),
        CaptureSpec("device-tree-compatible.txt", path="/proc/device-tree/compatible", systems=("Linux",)),
        # Only ever read from bundles (users paste these into tickets):
        CaptureSpec("collect_env.txt", internal="never"),
        CaptureSpec("clinfo-l.txt", internal="never"),
        # the device check's loader probe (mlprobe.verify.devicecheck.probe_loaders), as fixtures keep it
        CaptureSpec("opencl-loaders.json", internal="never"),
        CaptureSpec("Win32_VideoController.txt", internal="never"),
    )
}


# Captures a live scan starts before the probes run, all at once (scan/live/_early.py; LiveHost.prefetch
# for the other commands that scan this machine): the slowest (the OpenCL child), and the nvidia-smi
# queries the nvidia probe reads whenever nvidia-smi answers (the XML, the CSV for compute_cap, the
# topology matrix). Run one after another they cost their sum; at once, the slowest of them.
PREFETCH: Tuple[str, ...] = ("mlprobe-opencl.json", "nvidia-smi-q-x.xml", "nvidia-smi-query.csv",
                             "nvidia-smi-topo-m.txt")
EARLY: Tuple[str, ...] = tuple(n for n in PREFETCH if SPECS[n].argv is not None)


def spec(name: str) -> CaptureSpec:
    try:
        return SPECS[name]
    except KeyError:
        raise KeyError(f"unknown capture name {name!r}; add it to mlprobe.scan.capture.SPECS") from None


def decode(data: Optional[bytes]) -> str:
    """Bytes -> text the way parsers want it: UTF-8 (or UTF-16 with a BOM, as Windows tools
    write), undecodable bytes replaced, CRLF normalised to LF."""
    if data is None:
        return ""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", errors="replace")
    else:
        text = data.decode("utf-8", errors="replace")
        if text.startswith("\ufeff"):
            text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True)
class Capture:
    name: str
    status: str  # "ok", "absent", "error", "timeout"
    data: Optional[bytes] = None
    error: Optional[str] = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.data is not None

    def text(self) -> str:
        return decode(self.data)


class Host(Protocol):
    kind: str  # "live" or "replay"

    def get(self, name: str) -> Capture: ...

    def env(self, name: str) -> Optional[str]: ...

    def env_overrides(self) -> Dict[str, str]: ...

    def info(self) -> Dict[str, Any]: ...


def short(msg: str, limit: int = 300) -> str:
    msg = " ".join(msg.split())
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


class UnreadableFile(Exception):
    """A path that is not a regular file we may read (symlink where none is allowed, FIFO, device,
    folder, loop, permission denied). The message says which, in words."""


def _kind_of(mode: int) -> str:
    import stat

    for test, word in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return word
    return "not a regular file"


def read_regular(path: "str | os.PathLike[str]", max_bytes: int, follow_symlinks: bool = True) -> bytes:
    """At most `max_bytes` of a regular file. Never blocks on a FIFO, never reads a device, and with
    follow_symlinks=False refuses a symbolic link (a bundle must not point outside itself).
    FileNotFoundError when nothing is there; UnreadableFile for anything else that goes wrong."""
    import stat

    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        if not follow_symlinks or not os.path.lexists(path):
            raise
        raise UnreadableFile(f"{path} is a symbolic link to nothing") from None
    except OSError as exc:  # ELOOP (a symlink loop), EACCES on a folder on the way, ...
        raise UnreadableFile(f"could not read {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise UnreadableFile(f"{path} is a symbolic link; replay reads only regular files inside the bundle")
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableFile(f"{path} is {_kind_of(st.st_mode)}, not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UnreadableFile(f"could not read {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped after the first look
            raise UnreadableFile(f"{path} is not a regular file")
        chunks = []
        left = max_bytes
        # the first read sized by the file (one more byte tells that it did not grow), the rest in
        # pieces small enough that the buffer os.read allocates costs nothing: a 1 MiB buffer per
        # call was most of the time of reading 10,000 small reports
        want = st.st_size + 1 if st.st_size > 0 else 1 << 16
        while left > 0:
            chunk = os.read(fd, min(left, want))
            want = 1 << 16
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise UnreadableFile(f"could not read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


class BundleError(Exception):
    """A replay source that is not a bundle. Carries a user-facing message."""
