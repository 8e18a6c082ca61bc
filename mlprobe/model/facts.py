"""Every fact type mlprobe knows. Frozen dataclasses; unknown values are None, never "N/A".

Probes build these from parsed captures; the scan merges them into one `Facts`; rules, plan,
verify and report read only `Facts` (or its `to_dict()`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .contract import contract, Record, to_json

PROBE_STATUSES = ("ok", "absent", "error", "timeout")


class _ToDict(Record):
    __slots__ = ()

    def to_dict(self) -> Dict[str, Any]:
        """The fact as JSON data, through the one JSON writer of the contracts (model/contract.py)."""
        out: Dict[str, Any] = to_json(self)
        return out


@contract
class OsFacts(_ToDict):
    """The operating system: kernel, distribution, WSL, glibc, macOS version, Windows build."""

    system: Optional[str] = None  # "Linux", "Darwin", "Windows"
    release: Optional[str] = None  # kernel release / Windows release / Darwin release
    version: Optional[str] = None  # platform.version()
    distro: Optional[str] = None  # PRETTY_NAME of os-release, "macOS 14.5", "Windows 11 ..."
    distro_id: Optional[str] = None
    distro_version: Optional[str] = None
    wsl: Optional[bool] = None
    glibc: Optional[str] = None
    macos_version: Optional[str] = None
    windows_build: Optional[int] = None


@contract
class CoreType(_ToDict):
    """One kind of core in a CPU (big.LITTLE and DynamIQ systems have several)."""

    name: Optional[str] = None  # "Neoverse-N1", "Cortex-A715"; None when the part is not in the table
    count: int = 0  # how many `processor` entries are this kind
    implementer: Optional[str] = None  # ARM: "0x41"
    part: Optional[str] = None  # ARM: "0xd0c"


@contract
class CpuFacts(_ToDict):
    """The CPU: vendor, model, architecture, cores and threads, SIMD flags, x86-64 level, core kinds."""

    vendor: Optional[str] = None  # lowercase short: intel, amd, arm, apple, ...
    vendor_id: Optional[str] = None  # raw: GenuineIntel, AuthenticAMD, 0x41, ...
    model: Optional[str] = None
    arch: Optional[str] = None  # x86_64, aarch64, arm64, ...
    cores: Optional[int] = None
    threads: Optional[int] = None
    flags: Tuple[str, ...] = ()
    x86_64_level: Optional[int] = None
    source: Optional[str] = None  # which capture the facts came from
    core_types: Tuple[CoreType, ...] = ()  # ARM: each core kind, decoded from implementer/part
    isa_summary: Optional[str] = None  # plain words on the ML-relevant ISA features (ARM, s390x, ...)


@contract
class MemoryFacts(_ToDict):
    """Total and available memory in bytes."""

    total_bytes: Optional[int] = None
    available_bytes: Optional[int] = None


@contract
class PythonFacts(_ToDict):
    """The Python the plan is for: version, implementation, venv, PEP 668 marker, wheel tags."""

    version: Optional[str] = None
    implementation: Optional[str] = None
    executable: Optional[str] = None
    in_venv: Optional[bool] = None
    externally_managed: Optional[bool] = None
    platform_tags: Tuple[str, ...] = ()  # most specific first, trimmed
    machine: Optional[str] = None


@contract
class GpuLink(_ToDict):
    """How a GPU reaches one other GPU (`nvidia-smi topo -m`)."""

    peer: int  # the other GPU's index, in nvidia-smi's numbering
    type: str  # nvlink, pix, pxb, phb, node, sys, unknown
    code: str  # as nvidia-smi prints it: NV18, PHB, SOC, ...
    nvlinks: Optional[int] = None  # bonded NVLinks (NV18 -> 18)


@contract
class GpuNicLink(_ToDict):
    """How a GPU reaches one network card (GPUDirect RDMA wants PIX or PXB)."""

    name: str  # mlx5_0, or NIC0 when the capture has no NIC legend
    type: str
    code: str


@contract
class GpuTopology(_ToDict):
    """Where a GPU sits: its index in nvidia-smi's numbering, the CPUs and NUMA node close to it, and
    its link to every other GPU and network card."""

    index: int
    cpu_affinity: Optional[str] = None  # "0-55,112-167"
    numa_affinity: Optional[str] = None  # as printed: "0", "0-1"
    numa_node: Optional[int] = None  # when the affinity is one node
    gpu_numa_id: Optional[int] = None  # the GPU's own memory node (Grace Hopper, MIG-less C2C)
    links: Tuple[GpuLink, ...] = ()
    nics: Tuple[GpuNicLink, ...] = ()


@contract
class GpuFacts(_ToDict):
    """One physical accelerator, as seen by one or more sources."""

    vendor: str  # nvidia, amd, intel, apple, arm, qualcomm, ... (lowercase)
    name: Optional[str] = None
    driver_version: Optional[str] = None  # vendor's own numbering
    compute_capability: Optional[str] = None  # NVIDIA, "8.6"
    gfx_target: Optional[str] = None  # AMD: the hardware's own target, "gfx1031"
    runtime_gfx_target: Optional[str] = None  # AMD: what the runtime reports (override!)
    memory_bytes: Optional[int] = None
    integrated: Optional[bool] = None
    apis: Tuple[str, ...] = ()  # cuda, rocm, opencl, metal, directml, xpu, vulkan
    architecture: Optional[str] = None  # Hopper, Ampere, RDNA2, CDNA3, ...
    pci_bus_id: Optional[str] = None  # "0000:01:00.0"
    pci_vendor_id: Optional[str] = None  # "0x10de"
    pci_device_id: Optional[str] = None  # "0x2684"
    uuid: Optional[str] = None
    serial: Optional[str] = None
    compute_units: Optional[int] = None
    cores: Optional[int] = None  # Apple GPU cores
    mig_mode: Optional[str] = None  # "Enabled" / "Disabled"
    mig_devices: int = 0
    metal_support: Optional[str] = None
    driver_version_raw: Optional[str] = None  # e.g. Windows' 31.0.15.5222
    chip_id: Optional[str] = None
    topology: Optional[GpuTopology] = None  # NVIDIA: `nvidia-smi topo -m`
    sources: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()
    # AMD: the KFD/HSA node number (rocminfo's `Node:`, the KFD topology's node folder, amd-smi's
    # NODE_ID): the <n> of the runtime's per-device HSA_OVERRIDE_GFX_VERSION_<n>.
    kfd_node: Optional[int] = None


@contract
class OpenClDevice(_ToDict):
    """One OpenCL device as its platform lists it."""

    name: Optional[str] = None
    type: Optional[str] = None  # "CPU", "GPU", "ACCELERATOR", ...
    vendor: Optional[str] = None
    driver_version: Optional[str] = None
    version: Optional[str] = None
    opencl_c_version: Optional[str] = None
    compute_units: Optional[int] = None
    global_memory_bytes: Optional[int] = None
    fp16: Optional[bool] = None
    fp64: Optional[bool] = None
    board_name: Optional[str] = None  # AMD's board name extension
    pci_bus_id: Optional[str] = None
    host_unified_memory: Optional[bool] = None  # CL_DEVICE_HOST_UNIFIED_MEMORY: an integrated GPU
    compute_capability: Optional[str] = None  # NVIDIA: cl_nv_device_attribute_query, "8.6"


@contract
class OpenClPlatform(_ToDict):
    """One OpenCL platform and its devices."""

    name: Optional[str] = None
    vendor: Optional[str] = None
    version: Optional[str] = None
    devices: Tuple[OpenClDevice, ...] = ()


@contract
class UsbAccelerator(_ToDict):
    """A USB accelerator stick (Movidius, Coral, ...) by its USB ids."""

    vendor_id: str
    product_id: str
    name: Optional[str] = None
    kind: Optional[str] = None  # movidius-ncs, coral-usb, ...


@contract
class FrameworkFacts(_ToDict):
    """An installed framework: version, build flavour (CUDA/ROCm/CPU) and where it was found."""

    name: str
    version: Optional[str] = None
    flavour: Optional[str] = None  # cpu, cu130, rocm6.3, xpu, directml, metal, ...
    cuda: Optional[str] = None  # torch.version.cuda as recorded in version.py
    hip: Optional[str] = None
    location: Optional[str] = None
    source: Optional[str] = None


@contract
class ProbeStatus(_ToDict):
    """How one probe ended (ok, absent, error or timeout), how long it took, and its error."""

    name: str
    status: str  # one of PROBE_STATUSES
    seconds: float = 0.0
    error: Optional[str] = None


@contract
class Facts(_ToDict):
    """Everything a scan found: the scan contract that plan, report and diff read."""

    os: OsFacts = field(default_factory=OsFacts)
    cpu: CpuFacts = field(default_factory=CpuFacts)
    memory: MemoryFacts = field(default_factory=MemoryFacts)
    python: PythonFacts = field(default_factory=PythonFacts)
    gpus: Tuple[GpuFacts, ...] = ()
    runtimes: Dict[str, Any] = field(default_factory=dict)
    frameworks: Tuple[FrameworkFacts, ...] = ()
    usb_accelerators: Tuple[UsbAccelerator, ...] = ()
    warnings: Tuple[str, ...] = ()
    probes: Tuple[ProbeStatus, ...] = ()
    overrides: Dict[str, str] = field(default_factory=dict)

    def framework(self, name: str) -> Optional[FrameworkFacts]:
        for fw in self.frameworks:
            if fw.name == name:
                return fw
        return None


@dataclass
class Contribution:
    """What one probe adds to the scan. Mutable while the probe runs; merged by scan.py."""

    os: Optional[OsFacts] = None
    cpu: Optional[CpuFacts] = None
    memory: Optional[MemoryFacts] = None
    python: Optional[PythonFacts] = None
    gpus: List[GpuFacts] = field(default_factory=list)
    runtimes: Dict[str, Any] = field(default_factory=dict)
    frameworks: List[FrameworkFacts] = field(default_factory=list)
    usb_accelerators: List[UsbAccelerator] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    # Set by the probe: "ok" when it read something, "absent" when its sources are missing.
    status: str = "ok"
    error: Optional[str] = None


def replace(obj: Any, **changes: Any) -> Any:
    return dataclasses.replace(obj, **changes)
