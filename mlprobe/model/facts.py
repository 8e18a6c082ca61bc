"""Every fact type mlprobe knows. Frozen dataclasses; unknown values are None, never "N/A".

Probes build these from parsed captures; the scan merges them into one `Facts`; rules, plan,
verify and report read only `Facts` (or its `to_dict()`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type, TypeVar

from .docversion import schema_id, upgraded
from .contract import contract, from_json, KEYS_FIELD, NOT_JSON_FIELD, OPTIONAL_KEY, Record, to_json, unknown_as

R = TypeVar("R", bound="Runtime")

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
    # Which fact gave `arch`: the capture that states it ("proc-cpuinfo.txt"), or the fact it follows
    # from ("sycl-ls: Intel's OpenCL CPU device 'Intel(R) Core(TM) i9-14900K'", "a Jetson module").
    # None while arch is None: an architecture nothing in the capture implies stays unknown.
    arch_evidence: Optional[str] = None


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
class MigDevice(_ToDict):
    """One MIG device of a MIG-enabled NVIDIA GPU (`nvidia-smi -L`): the slice a job gets. Its MIG- UUID
    is what CUDA_VISIBLE_DEVICES takes to give a process that slice."""

    profile: str  # "1g.10gb", "3g.40gb": GPU-instance slices and memory, as nvidia-smi names it
    index: int  # `Device  N` under its GPU
    uuid: Optional[str] = None  # "MIG-feb88891-..."


@contract
class GpuFacts(_ToDict):
    """One physical accelerator, as seen by one or more sources."""

    # nvidia, amd, intel, apple, arm, qualcomm, ... (lowercase); "unknown" when no source names it, and
    # when a report read leniently has it damaged (the GPU is kept, not dropped)
    vendor: str = field(metadata=unknown_as("unknown"))
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
    mig: Tuple[MigDevice, ...] = ()  # each MIG device, where `nvidia-smi -L` lists them
    metal_support: Optional[str] = None
    driver_version_raw: Optional[str] = None  # e.g. Windows' 31.0.15.5222
    driver_date: Optional[str] = None  # Windows: the driver's date, "2025-06-30", or "2025" where day and month are ambiguous
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


# --------------------------------------------------------------------------- runtimes


class Runtime(_ToDict):
    """Base of the runtime records (`runtimes.cuda`, `.rocm`, ...). Several probes add to one runtime
    (nvidia-smi, collect_env and the Jetson release file all to `cuda`), and a key a probe wrote as
    null (it looked and found nothing) is not a key no probe wrote, so a runtime keeps the keys its
    sources gave, in order (`keys`), and writes only those (contract.KEEPS_KEYS)."""

    __slots__ = ()
    KEEPS_KEYS = True

    @classmethod
    def of(cls: Type[R], **values: Any) -> R:
        """A runtime with these keys written (None is written as null)."""
        return cls(**values, **{KEYS_FIELD: tuple(values)})

    def written(self, key: str) -> bool:
        return key in getattr(self, KEYS_FIELD)

    def but(self: R, **values: Any) -> R:
        """This runtime with these keys (re)written."""
        keys: Tuple[str, ...] = getattr(self, KEYS_FIELD)
        return dataclasses.replace(self, **values,  # type: ignore[type-var]
                                   **{KEYS_FIELD: keys + tuple(k for k in values if k not in keys)})

    def merged(self: R, other: R) -> R:
        """This runtime with the keys only `other` wrote (a key written first stays, even as null)."""
        new = {k: getattr(other, k) for k in getattr(other, KEYS_FIELD) if not self.written(k)}
        return self.but(**new) if new else self


@contract
class CudaTopology(_ToDict):
    """`nvidia-smi topo -m` in a few figures (runtimes.cuda.topology)."""

    summary: str
    gpu_count: int
    nvlink_pairs: int
    gpu_pairs: int
    nics: Tuple[str, ...] = ()


@contract
class JetsonInfo(_ToDict):
    """A Jetson board: its L4T release, the JetPack that ships it, SoC, module and board."""

    l4t: Optional[str] = None
    jetpack: Optional[str] = None
    soc: Optional[str] = None
    module: Optional[str] = None
    compatible: Tuple[str, ...] = ()
    board: Optional[str] = None


@contract
class CudaRuntime(Runtime):
    """The NVIDIA driver and the CUDA version it supports (nvidia-smi, collect_env), the kernel
    module's flavour, WSL2's own nvidia-smi version, a pasted toolkit version, the GPU links, and
    the Jetson board (its release file)."""

    driver_version: Optional[str] = None
    version: Optional[str] = None  # the newest CUDA the driver supports
    kernel_module: Optional[str] = None  # "open" / "proprietary"
    smi_version: Optional[str] = None  # WSL2: the Linux nvidia-smi over the Windows driver
    toolkit_version: Optional[str] = None  # collect_env's "CUDA runtime version"
    topology: Optional[CudaTopology] = None
    jetson: Optional[JetsonInfo] = None
    tcc_gpus: Tuple[str, ...] = ()  # Windows: the GPUs nvidia-smi shows in the TCC driver model
    keys: Tuple[str, ...] = field(default=(), metadata=NOT_JSON_FIELD)


@contract
class RocmRuntime(Runtime):
    """ROCm: its version, HSA_OVERRIDE_GFX_VERSION and whether it is in effect, the HSA runtime and
    kernel module versions, WSL, the targets the runtime reports; HIP and MIOpen from collect_env."""

    version: Optional[str] = None
    hsa_override_gfx_version: Optional[str] = None
    override_in_effect: Optional[bool] = None
    hsa_runtime_version: Optional[str] = None
    rock_module_version: Optional[str] = None
    wsl: Optional[bool] = None
    gfx_targets: Tuple[str, ...] = ()
    hip_version: Optional[str] = None
    miopen_version: Optional[str] = None
    keys: Tuple[str, ...] = field(default=(), metadata=NOT_JSON_FIELD)


@contract
class OpenClRuntime(Runtime):
    """The OpenCL platforms and their devices."""

    platforms: Tuple["OpenClPlatform", ...] = ()
    # vendor ICD libraries (knowledge/opencl_loaders.json vendor_icds) the loader cache holds and no ICD
    # entry names: drivers no loader loads (absent when there are none, or the capture lacks the files)
    unregistered_icds: Optional[Tuple[str, ...]] = field(default=None, metadata=OPTIONAL_KEY)
    keys: Tuple[str, ...] = field(default=(), metadata=NOT_JSON_FIELD)


@contract
class MetalRuntime(Runtime):
    """What Metal the Mac offers, led by its Apple GPU if it has one."""

    support: Optional[str] = None
    apple_gpu: Optional[bool] = None
    gpu: Optional[str] = None
    keys: Tuple[str, ...] = field(default=(), metadata=NOT_JSON_FIELD)


@contract
class DirectMlRuntime(Runtime):
    """DirectML: on Windows the build and the adapters it can use; in WSL2 /dev/dxg and the
    libraries under /usr/lib/wsl/lib."""

    windows_build: Optional[int] = None
    adapters: Tuple[str, ...] = ()
    wsl: Optional[bool] = None
    dev_dxg: Optional[bool] = None
    wsl_lib: Tuple[str, ...] = ()
    d3d12: Optional[bool] = None
    dxcore: Optional[bool] = None
    cuda: Optional[bool] = None
    keys: Tuple[str, ...] = field(default=(), metadata=NOT_JSON_FIELD)


@contract
class CannRuntime(Runtime):
    """Huawei's CANN toolkit for Ascend NPUs: version, architecture, whether it is installed, and the
    NPU driver's version."""

    version: Optional[str] = None
    arch: Optional[str] = None
    installed: Optional[bool] = None
    driver_version: Optional[str] = None
    keys: Tuple[str, ...] = field(default=(), metadata=NOT_JSON_FIELD)


@contract
class Runtimes(_ToDict):
    """The GPU runtimes the scan found, one record each (None: not found). A new runtime is a record
    above and a field here."""

    cuda: Optional[CudaRuntime] = None
    rocm: Optional[RocmRuntime] = None
    opencl: Optional[OpenClRuntime] = None
    metal: Optional[MetalRuntime] = None
    directml: Optional[DirectMlRuntime] = None
    cann: Optional[CannRuntime] = field(default=None, metadata=OPTIONAL_KEY)

    def merged(self, other: "Runtimes") -> "Runtimes":
        """Each runtime of this one, with what `other` adds to it (see Runtime.merged)."""
        changes: Dict[str, Any] = {}
        for name in _RUNTIME_NAMES:
            theirs = getattr(other, name)
            if theirs is None:
                continue  # most probes add no runtime
            mine = getattr(self, name)
            changes[name] = theirs if mine is None else mine.merged(theirs)
        return dataclasses.replace(self, **changes) if changes else self


_RUNTIME_NAMES = tuple(f.name for f in dataclasses.fields(Runtimes))


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
    runtimes: Runtimes = Runtimes()
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

    @classmethod
    def from_report(cls, doc: Any) -> "Facts":
        """The facts of a scan report (`scan --json`, a report's `scan`) from a document nobody
        checked: read leniently (model/contract.py), a value of the wrong type is unknown."""
        return from_json(cls, doc, lenient=True)


SCAN_SCHEMA = schema_id("scan")


@contract
class ScanReport(Facts):
    """The scan as `mlprobe scan --json` writes it (`"schema": "mlprobe.scan/2"`): the Facts with mlprobe's version
    and where the scan came from (`{"kind": "live"}`, `{"kind": "replay", "bundle": ...}`)."""

    schema: str = SCAN_SCHEMA
    mlprobe_version: str = ""
    source: Optional[Mapping[str, str]] = field(default=None, metadata=OPTIONAL_KEY)

    @classmethod
    def of(cls, facts: Facts, source: Optional[Mapping[str, str]] = None) -> "ScanReport":
        from .. import __version__

        values = {f.name: getattr(facts, f.name) for f in dataclasses.fields(Facts)}
        return cls(**values, mlprobe_version=__version__, source=dict(source) if source else None)

    def facts(self) -> Facts:
        return Facts(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Facts)})

    def to_json(self) -> Dict[str, Any]:
        """The header first (schema, mlprobe_version, source), then the facts."""
        doc: Dict[str, Any] = to_json(self)
        head: Dict[str, Any] = {k: doc.pop(k) for k in ("schema", "mlprobe_version", "source") if k in doc}
        return {**head, **doc}

    to_dict = to_json

    @classmethod
    def from_json(cls, doc: Any) -> "ScanReport":
        """A scan report (an old one, `report_version: 1`, too); a field of the wrong shape is a
        ContractError naming it."""
        return from_json(cls, upgraded(doc, "scan"))


@dataclass
class Contribution:
    """What one probe adds to the scan. Mutable while the probe runs; merged by scan.py."""

    os: Optional[OsFacts] = None
    cpu: Optional[CpuFacts] = None
    memory: Optional[MemoryFacts] = None
    python: Optional[PythonFacts] = None
    gpus: List[GpuFacts] = field(default_factory=list)
    runtimes: Runtimes = Runtimes()
    frameworks: List[FrameworkFacts] = field(default_factory=list)
    usb_accelerators: List[UsbAccelerator] = field(default_factory=list)
    # What a probe's output says of the CPU although it is no CPU source (a CPU device of sycl-ls or
    # OpenCL, rocminfo's CPU agent, a Python platform tag): used only where no CPU source has it.
    cpu_hints: List[CpuFacts] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    # Set by the probe: "ok" when it read something, "absent" when its sources are missing.
    status: str = "ok"
    error: Optional[str] = None


def replace(obj: Any, **changes: Any) -> Any:
    return dataclasses.replace(obj, **changes)
