"""`python -m torch.utils.collect_env` as users paste it into bug reports (collect_env.txt).

It knows the torch build (version, CUDA/ROCm it was built for), the GPUs (`nvidia-smi -L` lines
on CUDA machines; on ROCm only the current device's name, sometimes with its gfx target), the
NVIDIA driver, the CUDA toolkit / HIP / MIOpen versions on the machine, the OS, and (newer torch)
the CPU as lscpu (Linux) or WMI (Windows) print it. "N/A", "Could not collect", "None", "No CUDA"
are unknowns, never values.

OS facts are given only when the bundle has no host.json, CPU facts only when it has no CPU source
of its own (/proc/cpuinfo, lscpu, sysctl or py-cpuinfo): a paste is second-hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..errors import ParseError
from ..model.facts import (Contribution, CpuFacts, CudaRuntime, FrameworkFacts, GpuFacts, OsFacts, RocmRuntime,
                           Runtimes)
from ..scan.capture import Host
from ..model.vendors import vendor_from_text
from ..model import builds as fw
from ._util import clean_text, single_capture
from ..model.hw.cpu import X86_VENDORS, x86_64_level
from .cpu_lscpu import cpu_from_lscpu, parse_lscpu

SOURCE = "collect_env"
_UNKNOWN = {"", "n/a", "na", "none", "could not collect", "no cuda", "unknown", "not available"}

# Single-line "Key: value" entries collect_env prints (torch 1.x - 2.x).
KEYS = (
    "PyTorch version",
    "Is debug build",
    "CUDA used to build PyTorch",
    "ROCM used to build PyTorch",
    "OS",
    "GCC version",
    "Clang version",
    "CMake version",
    "Libc version",
    "Python version",
    "Python platform",
    "Is CUDA available",
    "CUDA runtime version",
    "CUDA_MODULE_LOADING set to",
    "GPU models and configuration",
    "Nvidia driver version",
    "cuDNN version",
    "HIP runtime version",
    "MIOpen runtime version",
    "Is XNNPACK available",
    "CPU",
    "Versions of relevant libraries",
    "Is XPU available",
    "XPU used to build PyTorch",
    "Intel GPU driver version",
    "Intel GPU models onboard",
    "Intel GPU models detected",
)
_KEY_RE = re.compile(
    r"^(" + "|".join(re.escape(k) for k in sorted(KEYS, key=len, reverse=True)) + r"):[ \t]?(.*)$"
)
_INTEL_SECTIONS = ("Intel GPU driver version", "Intel GPU models onboard", "Intel GPU models detected")
_GPU_LINE = re.compile(r"^GPU\s+(\d{1,3}):\s*(.+?)\s*(?:\(UUID:[^)]*\))?\s*$")


@dataclass
class CollectEnv:
    values: Dict[str, Optional[str]] = field(default_factory=dict)
    gpu_inline: Optional[str] = None  # the value on the key's own line (a single device)
    gpu_lines: List[str] = field(default_factory=list)  # `GPU N: name` lines
    cpu_lines: List[str] = field(default_factory=list)
    libraries: List[Tuple[str, str, str]] = field(default_factory=list)  # (channel, name, version)
    # torch 2.6+ on an XPU build with a GPU: the `* ...` lines under "Intel GPU driver version:",
    # "Intel GPU models onboard:" (xpu-smi's or WMI's names) and "Intel GPU models detected:"
    # (`* [0] _XpuDeviceProperties(name='...', device_id=0xE211, total_memory=23256MB, ...)`).
    intel_lines: Dict[str, List[str]] = field(default_factory=dict)

    def get(self, key: str) -> Optional[str]:
        return self.values.get(key)


def known(value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    v = value.strip()
    return None if v.lower() in _UNKNOWN else v


def _cut_marker(name: str) -> bool:
    """A GPU name that is the start of one of collect_env's "nothing here" words ("N" of "No CUDA", "N/"
    of "N/A"): the text was cut there (a paste, a full disk), so it names no device."""
    v = name.strip().lower()
    return any(u.startswith(v) for u in _UNKNOWN)


def parse_collect_env(text: str) -> CollectEnv:
    text = clean_text(text)
    out = CollectEnv()
    section: Optional[str] = None  # a multi-line value being read
    for raw in text.split("\n"):
        line = raw.rstrip()
        m = _KEY_RE.match(line.strip()) if line.strip() else None
        if m:
            key, value = m.group(1), m.group(2).strip()
            out.values.setdefault(key, known(value))
            section = (
                key
                if key
                in ("GPU models and configuration", "CPU", "Versions of relevant libraries", "cuDNN version")
                + _INTEL_SECTIONS
                else None
            )
            if key == "GPU models and configuration" and value and out.gpu_inline is None:
                out.gpu_inline = value
            continue
        if not line.strip():
            if section == "GPU models and configuration":
                section = None  # the GPU list ends at its blank line
            continue
        if section == "GPU models and configuration":
            if _GPU_LINE.match(line.strip()):
                out.gpu_lines.append(line.strip())
        elif section in _INTEL_SECTIONS and section is not None:
            if line.strip().startswith("*"):
                out.intel_lines.setdefault(section, []).append(line.strip()[1:].strip())
        elif section == "CPU":
            out.cpu_lines.append(line)
        elif section == "Versions of relevant libraries":
            lib = re.match(
                r"^\[(pip\d?|conda)\]\s+([A-Za-z0-9][A-Za-z0-9._-]*)(?:==|\s+)([0-9][^\s]*)", line.strip()
            )
            if lib:
                out.libraries.append((lib.group(1), lib.group(2), lib.group(3)))
    if "PyTorch version" not in out.values:
        raise ParseError("no 'PyTorch version:' line: not torch.utils.collect_env output")
    return out


# -- facts -------------------------------------------------------------------------------------------------


def _system(env: CollectEnv) -> Optional[str]:
    os_line = env.get("OS") or ""
    platform = env.get("Python platform") or ""
    if re.search(r"windows", os_line + " " + platform, re.I):
        return "Windows"
    if re.search(r"mac\s?os|darwin", os_line + " " + platform, re.I):
        return "Darwin"
    if platform.lower().startswith("linux") or re.search(
        r"linux|ubuntu|debian|centos|red hat|rhel|fedora|"
        r"rocky|alma|suse|arch|amazon|oracle",
        os_line,
        re.I,
    ):
        return "Linux"
    return None


def gpus_from_env(env: CollectEnv) -> List[GpuFacts]:
    cuda_build = known(env.get("CUDA used to build PyTorch"))
    rocm_build = known(env.get("ROCM used to build PyTorch"))
    available = (env.get("Is CUDA available") or "").lower() == "true"
    nv_driver = known(env.get("Nvidia driver version"))
    out: List[GpuFacts] = []
    seen: set[str] = set()
    entries: List[Tuple[Optional[str], str]] = []
    inline = _GPU_LINE.match(env.gpu_inline) if env.gpu_inline else None
    if inline:
        entries.append((inline.group(1), inline.group(2)))
    elif env.gpu_inline and known(env.gpu_inline) and not env.gpu_lines:
        entries.append((None, env.gpu_inline.strip()))  # ROCm/macOS: the current device's name
    for line in env.gpu_lines:
        m = _GPU_LINE.match(line)
        if m:
            entries.append((m.group(1), m.group(2)))
    for index, name in entries:
        if not known(name) or _cut_marker(name):
            continue
        key = index if index is not None else name
        if key in seen:
            continue
        seen.add(key)
        gfx = None
        gm = re.search(r"\((gfx[0-9a-f]+)(?::[^)]*)?\)\s*$", name)
        if gm:
            gfx, name = gm.group(1), name[: gm.start()].strip()
        vendor = vendor_from_text(name) or ("amd" if (rocm_build or gfx) else "unknown")
        apis: List[str] = []
        if vendor == "nvidia" and (nv_driver or (cuda_build and available)):
            apis.append("cuda")
        if vendor == "amd" and rocm_build and available:
            apis.append("rocm")
        notes: Tuple[str, ...] = ()
        if rocm_build and index is None:
            notes = ("collect_env names only the current ROCm device",)
        cc = arch = integrated = None
        if vendor == "nvidia":
            from ..model.hw.nvidia import architecture_for, compute_capability_for, integrated_for

            cc = compute_capability_for(name)
            arch, integrated = architecture_for(cc), integrated_for(name)
        out.append(
            GpuFacts(
                vendor=vendor,
                name=name,
                driver_version=nv_driver if vendor == "nvidia" else None,
                compute_capability=cc,
                architecture=arch,
                integrated=integrated,
                runtime_gfx_target=gfx,
                apis=tuple(apis),
                sources=(SOURCE,),
                notes=notes,
            )
        )
    return out


_XPU_PROPS = re.compile(r"^\[(\d+)\]\s*_XpuDeviceProperties\((.*)\)\s*$")
_XPU_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\[[^\]]*\]|[^,]*)")


def _xpu_fields(body: str) -> Dict[str, str]:
    """`name='Intel(R) Graphics [0xe20b]', type='gpu', device_id=0xE20B, total_memory=11605MB` -> dict."""
    return {m.group(1): m.group(2).strip().strip("'") for m in _XPU_FIELD.finditer(body)}


def _intel_driver(env: CollectEnv) -> Optional[str]:
    """The compute runtime's version from the driver list (`* intel-opencl-icd: 25.44.36015.8-0`,
    the package's upstream version without its packaging revision)."""
    for line in env.intel_lines.get("Intel GPU driver version", []):
        m = re.match(r"^(?:intel-opencl-icd|libze-intel-gpu1|intel-level-zero-gpu)\s*:\s*(\d[\w.]*)", line)
        if m:
            return m.group(1)
    return None


def xpu_gpus_from_env(env: CollectEnv) -> List[GpuFacts]:
    """The Intel GPUs torch's XPU build saw ("Intel GPU models detected"), else the ones xpu-smi or
    WMI named ("Intel GPU models onboard"). A runtime that names the part only by its PCI id
    (`Intel(R) Graphics [0xe20b]`, or `device_id=0xE20B` in newer torch) is named from the Intel
    table."""
    from ..model.hw.intel import intel_gpu_info, intel_gpu_info_by_name

    available = (env.get("Is XPU available") or "").lower().startswith("true")
    driver = _intel_driver(env)
    out: List[GpuFacts] = []
    detected = [m for m in (_XPU_PROPS.match(x) for x in env.intel_lines.get("Intel GPU models detected", [])) if m]
    for m in detected:
        f = _xpu_fields(m.group(2))
        if f.get("type") not in (None, "gpu"):
            continue
        name = known(f.get("name"))
        pci = None
        dm = re.fullmatch(r"0x([0-9a-fA-F]{1,4})", f.get("device_id", ""))
        nm = re.search(r"\[0x([0-9a-fA-F]{4})\]\s*$", name or "")
        if dm or nm:
            pci = f"0x{int((dm or nm).group(1), 16):04x}"  # type: ignore[union-attr]
        info = intel_gpu_info(pci) if pci else intel_gpu_info_by_name(name)
        if info and info.get("name") and (not name or nm):
            name = str(info["name"])
        mem = re.fullmatch(r"(\d+)MB", f.get("total_memory", ""))
        discrete = info.get("discrete") if info else None
        out.append(GpuFacts(
            vendor="intel", name=name, driver_version=driver,
            # torch prints total_memory // 2**20 with the unit "MB"; an integrated GPU's is a share of RAM
            memory_bytes=int(mem.group(1)) * 2**20 if mem and discrete else None,
            integrated=(not discrete) if isinstance(discrete, bool) else None,
            apis=("xpu",) if available else (), architecture=info.get("generation") if info else None,
            pci_vendor_id="0x8086", pci_device_id=pci,
            compute_units=int(f["max_compute_units"]) if f.get("max_compute_units", "").isdigit() else None,
            sources=(SOURCE,), notes=(f"torch.xpu device {m.group(1)} ({f.get('platform_name') or '?'})",)))
    if not out:
        for line in env.intel_lines.get("Intel GPU models onboard", []):
            name = known(line)
            if name:
                info = intel_gpu_info_by_name(name)
                out.append(GpuFacts(vendor="intel", name=name, driver_version=driver,
                                    architecture=info.get("generation") if info else None,
                                    sources=(SOURCE,), notes=("named by xpu-smi / WMI in collect_env",)))
    return out


def frameworks_from_env(env: CollectEnv) -> List[FrameworkFacts]:
    system = _system(env)
    cuda = known(env.get("CUDA used to build PyTorch"))
    hip = known(env.get("ROCM used to build PyTorch"))
    out: List[FrameworkFacts] = []
    torch_version = known(env.get("PyTorch version"))
    if torch_version:
        out.append(
            FrameworkFacts(
                name="torch",
                version=torch_version,
                flavour=fw.flavour("torch", torch_version, cuda, hip, system),
                cuda=cuda,
                hip=hip,
                source=SOURCE,
            )
        )
    seen = {"torch"} if torch_version else set()
    for _channel, name, version in env.libraries:
        norm = fw.normalise(name)
        if norm not in fw.FRAMEWORKS or norm in seen:
            continue
        seen.add(norm)
        out.append(
            FrameworkFacts(
                name=norm,
                version=version,
                flavour=fw.flavour(norm, version, None, None, system),
                source=SOURCE,
            )
        )
    return out


def runtimes_from_env(env: CollectEnv, system: Optional[str]) -> Runtimes:
    from ..model.hw.nvidia import cuda_for_driver

    cuda = rocm = None
    driver = known(env.get("Nvidia driver version"))
    toolkit = known(env.get("CUDA runtime version"))
    if driver or (toolkit and re.match(r"^\d+\.\d+", toolkit)):
        cuda = CudaRuntime.of(
            driver_version=driver,
            version=cuda_for_driver(driver, system),
            toolkit_version=toolkit if toolkit and re.match(r"^\d+\.\d+", toolkit) else None,
        )
    hip = known(env.get("HIP runtime version"))
    miopen = known(env.get("MIOpen runtime version"))
    if hip or miopen:
        rocm = RocmRuntime.of(hip_version=hip, miopen_version=miopen)
    return Runtimes(cuda=cuda, rocm=rocm)


def os_from_env(env: CollectEnv) -> Optional[OsFacts]:
    system = _system(env)
    if system is None:
        return None
    os_line = known(env.get("OS"))
    platform = env.get("Python platform") or ""
    distro = (
        re.sub(r"\s*\((x86_64|aarch64|arm64|ppc64le|s390x|i686|AMD64)\)\s*$", "", os_line or "").strip()
        or None
    )
    release = None
    build = None
    wsl = None
    glibc = None
    if system == "Linux":
        m = re.match(r"^Linux-(\S+?)-(?:x86_64|aarch64|ppc64le|s390x|i686)", platform)
        release = m.group(1) if m else None
        wsl = bool(re.search(r"microsoft|wsl", platform, re.I))
        libc = known(env.get("Libc version")) or ""
        gm = re.search(r"glibc[- ](\d+\.\d+)", libc) or re.search(r"with-glibc(\d+\.\d+)", platform)
        glibc = gm.group(1) if gm else None
    elif system == "Windows":
        m = re.search(r"Windows-(\d+)-10\.0\.(\d+)", platform)
        build = int(m.group(2)) if m else None
        release = m.group(1) if m else None
        wsl = False
    elif system == "Darwin":
        wsl = False
    return OsFacts(
        system=system,
        release=release,
        distro=distro,
        wsl=wsl,
        glibc=glibc,
        windows_build=build,
        version=f"10.0.{build}" if build else None,
    )


def cpu_from_env(env: CollectEnv) -> Optional[CpuFacts]:
    if not env.cpu_lines:
        return None
    text = "\n".join(env.cpu_lines)
    try:
        fields = parse_lscpu(text)
        if "Architecture" in fields and not fields["Architecture"].isdigit():
            return _replace_source(cpu_from_lscpu(fields))
    except ParseError:
        pass
    # Windows: WMI Win32_Processor as `Key=Value` (older) or `Key: Value` (newer torch).
    kv: Dict[str, str] = {}
    for line in env.cpu_lines:
        m = re.match(r"^\s*([A-Za-z0-9]+)\s*[=:]\s*(.*)$", line)
        if m:
            kv.setdefault(m.group(1), m.group(2).strip())
    name = known(kv.get("Name"))
    if name is None:
        first = env.cpu_lines[0].strip()  # macOS prints just the brand string
        return (
            CpuFacts(
                model=first or None,
                vendor="apple" if first.startswith("Apple") else None,
                arch="arm64" if first.startswith("Apple") else None,
                source="collect_env.txt",
            )
            if first
            else None
        )
    vendor_id = known(kv.get("Manufacturer"))
    arch = {"9": "x86_64", "12": "aarch64", "5": "arm", "0": "i686"}.get(kv.get("Architecture", ""))
    return CpuFacts(
        vendor=X86_VENDORS.get(vendor_id or "", (vendor_id or "").lower() or None),
        vendor_id=vendor_id,
        model=" ".join(name.split()),
        arch=arch,
        source="collect_env.txt",
    )


def _replace_source(cpu: CpuFacts) -> CpuFacts:
    from dataclasses import replace

    level = x86_64_level(cpu.flags) if cpu.arch == "x86_64" and cpu.flags else None
    return replace(cpu, source="collect_env.txt", x86_64_level=level,
                   arch_evidence="collect_env.txt (its lscpu block)" if cpu.arch else None)


def probe(host: Host) -> Contribution:
    out = Contribution()
    env = single_capture(host, "collect_env.txt", parse_collect_env, out, "no collect_env.txt in this capture")
    if env is None:
        return out
    system = _system(env)
    out.gpus = gpus_from_env(env) + xpu_gpus_from_env(env)
    out.frameworks = frameworks_from_env(env)
    out.runtimes = runtimes_from_env(env, system)
    if not host.get("host.json").ok:
        out.os = os_from_env(env)
    # host.json names the platform, never the CPU: the paste's CPU facts count unless a CPU source
    # of its own is in the bundle (the cpu probe, first in the merge, then wins anyway).
    if not any(host.get(n).ok for n in ("proc-cpuinfo.txt", "lscpu.txt", "sysctl.txt", "py-cpuinfo.json")):
        out.cpu = cpu_from_env(env)
    hint = arch_from_platform(env)
    if hint is not None:
        out.cpu_hints.append(hint)
    return out


def arch_from_platform(env: CollectEnv) -> Optional[CpuFacts]:
    """The architecture in the Python platform tag (`Linux-6.8.0-x86_64-with-glibc2.39`,
    `macOS-14.1-arm64-arm-64bit`): the machine the pasting Python ran on."""
    platform = env.get("Python platform") or ""
    m = re.search(r"-(x86_64|aarch64|arm64|ppc64le|s390x|riscv64|AMD64)(?:-|$)", platform)
    if not m:
        return None
    arch = {"AMD64": "x86_64"}.get(m.group(1), m.group(1))
    return CpuFacts(arch=arch, source="collect_env.txt",
                    arch_evidence=f"collect_env's Python platform tag ({platform})")


__all__ = [
    "CollectEnv",
    "cpu_from_env",
    "frameworks_from_env",
    "gpus_from_env",
    "os_from_env",
    "parse_collect_env",
    "probe",
    "runtimes_from_env",
]
