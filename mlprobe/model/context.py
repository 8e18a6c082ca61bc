"""The rules context as typed records: what the recipes' conditions and the named tests read
(`{"fact": "nvidia.count"}`, `{nvidia.count}` in a sentence). plan/context.py derives one from the scan's
`Facts`; knowledge/registry.json (`facts`) lists the paths a recipe may name.

Where a view is the scan's own record (`os` is the scan's OsFacts with the inferred system, `gpus`,
`intel.gpus`, `directml.gpus`, `ascend.npus` are its GpuFacts, `frameworks` its FrameworkFacts), a field
added to that record reaches the conditions with no edit here: adding a fact is the field and its
line in the registry."""

from __future__ import annotations

from typing import Mapping, Optional, Tuple, TypeVar

from .facts import FrameworkFacts, GpuFacts, JetsonInfo, OsFacts, UsbAccelerator


V = TypeVar("V", bound="View")


class View:
    """Base of the context's records: plain classes with slots (a plan makes a handful, and defining
    them costs nothing at import, where a dataclass compiles its methods), built once by
    plan/context.py and only read after. `fields()` names what a condition may read."""

    __slots__ = ()

    @classmethod
    def fields(cls) -> Tuple[str, ...]:
        return tuple(n for c in reversed(cls.__mro__) for n in getattr(c, "__slots__", ()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.fields()) + ")"

    def but(self: V, **changes: object) -> V:
        """A copy with these fields changed."""
        new = object.__new__(type(self))
        for n in self.fields():
            setattr(new, n, changes[n] if n in changes else getattr(self, n))
        return new


class CpuView(View):
    """The CPU as the rules read it: the architecture normalised (x86_64, arm64), the flags (None
    when unknown, or settled by the x86-64 level or the CPU family)."""

    __slots__ = ('arch', 'flags', 'x86_64_level', 'vendor', 'model')

    arch: Optional[str]
    flags: Optional[Tuple[str, ...]]
    x86_64_level: Optional[int]
    vendor: Optional[str]
    model: Optional[str]

    def __init__(self, arch: Optional[str] = None, flags: Optional[Tuple[str, ...]] = None,
                       x86_64_level: Optional[int] = None, vendor: Optional[str] = None,
                       model: Optional[str] = None) -> None:
        self.arch = arch
        self.flags = flags
        self.x86_64_level = x86_64_level
        self.vendor = vendor
        self.model = model


class PythonTarget(View):
    """The Python the plan is for (X.Y), where that came from (--python, the scan) and what the scan
    found."""

    __slots__ = ('version', 'source', 'scanned')

    version: Optional[str]
    source: Optional[str]
    scanned: Optional[str]

    def __init__(self, version: Optional[str] = None, source: Optional[str] = None,
                       scanned: Optional[str] = None) -> None:
        self.version = version
        self.source = source
        self.scanned = scanned


class NvidiaGpu(View):
    """An NVIDIA GPU the driver drives: its compute capability (the probe's, or from its name)."""

    __slots__ = ('name', 'cc', 'driver', 'mig', 'integrated')

    name: Optional[str]
    cc: Optional[str]
    driver: Optional[str]
    mig: bool
    integrated: Optional[bool]

    def __init__(self, name: Optional[str] = None, cc: Optional[str] = None, driver: Optional[str] = None,
                       mig: bool = False, integrated: Optional[bool] = None) -> None:
        self.name = name
        self.cc = cc
        self.driver = driver
        self.mig = mig
        self.integrated = integrated


class BusGpu(View):
    """A GPU lspci lists and the driver does not drive."""

    __slots__ = ('name', 'pci_bus_id')

    name: Optional[str]
    pci_bus_id: Optional[str]

    def __init__(self, name: Optional[str] = None, pci_bus_id: Optional[str] = None) -> None:
        self.name = name
        self.pci_bus_id = pci_bus_id


class NvidiaView(View):
    """The NVIDIA GPUs CUDA can use, the driver, the CUDA version it supports, its kernel module."""

    __slots__ = ('count', 'gpus', 'driver', 'cuda_version', 'kernel_module', 'mig', 'names', 'undriven')

    count: int
    gpus: Tuple[NvidiaGpu, ...]
    driver: Optional[str]
    cuda_version: Optional[str]
    kernel_module: Optional[str]
    mig: bool
    names: Tuple[Optional[str], ...]
    undriven: Tuple[BusGpu, ...]

    def __init__(self, count: int = 0, gpus: Tuple[NvidiaGpu, ...] = (), driver: Optional[str] = None,
                       cuda_version: Optional[str] = None, kernel_module: Optional[str] = None,
                       mig: bool = False, names: Tuple[Optional[str], ...] = (),
                       undriven: Tuple[BusGpu, ...] = ()) -> None:
        self.count = count
        self.gpus = gpus
        self.driver = driver
        self.cuda_version = cuda_version
        self.kernel_module = kernel_module
        self.mig = mig
        self.names = names
        self.undriven = undriven


class AmdGpu(View):
    """An AMD GPU: its gfx target (the hardware's, else the runtime's), the runtime's, and its place
    among the AMD GPUs (ROCm's device index), UUID and KFD node."""

    __slots__ = ('name', 'gfx', 'runtime_gfx', 'integrated', 'index', 'uuid', 'node', 'driver_date')

    name: Optional[str]
    gfx: Optional[str]
    runtime_gfx: Optional[str]
    integrated: bool
    index: int
    uuid: Optional[str]
    node: Optional[int]
    driver_date: Optional[str]

    def __init__(self, name: Optional[str] = None, gfx: Optional[str] = None,
                       runtime_gfx: Optional[str] = None, integrated: bool = False, index: int = 0,
                       uuid: Optional[str] = None, node: Optional[int] = None,
                       driver_date: Optional[str] = None) -> None:
        self.name = name
        self.gfx = gfx
        self.runtime_gfx = runtime_gfx
        self.integrated = integrated
        self.index = index
        self.uuid = uuid
        self.node = node
        self.driver_date = driver_date


class AmdView(View):
    """The AMD GPUs; the discrete ones are the targets when there are any, the others are `others`."""

    __slots__ = ('count', 'gpus', 'targets', 'others', 'gfx')

    count: int
    gpus: Tuple[AmdGpu, ...]
    targets: Tuple[AmdGpu, ...]
    others: Tuple[AmdGpu, ...]
    gfx: Tuple[str, ...]

    def __init__(self, count: int = 0, gpus: Tuple[AmdGpu, ...] = (), targets: Tuple[AmdGpu, ...] = (),
                       others: Tuple[AmdGpu, ...] = (), gfx: Tuple[str, ...] = ()) -> None:
        self.count = count
        self.gpus = gpus
        self.targets = targets
        self.others = others
        self.gfx = gfx


class GpuGroup(View):
    """The GPUs of one kind (Intel, DirectML-capable) as the scan has them."""

    __slots__ = ('count', 'gpus')

    count: int
    gpus: Tuple[GpuFacts, ...]

    def __init__(self, count: int = 0, gpus: Tuple[GpuFacts, ...] = ()) -> None:
        self.count = count
        self.gpus = gpus


class DirectMlView(View):
    """The GPUs DirectML can use, and whether one is discrete."""

    __slots__ = ('count', 'gpus', 'discrete')

    count: int
    gpus: Tuple[GpuFacts, ...]
    discrete: bool

    def __init__(self, count: int = 0, gpus: Tuple[GpuFacts, ...] = (), discrete: bool = False) -> None:
        self.count = count
        self.gpus = gpus
        self.discrete = discrete


class AscendView(View):
    """Huawei Ascend NPUs and the CANN toolkit: its version ("8.3.RC2") and series ("8.3"); the NPU driver's
    series ("25.0" of 25.0.rc1.1); the CANN series torch-npu is matched on (`cann_target_series`: the
    installed one, or where none is installed the newest that fits the driver) and its name (`cann_target`)."""

    __slots__ = ('count', 'npus', 'cann_installed', 'cann_version', 'cann_series', 'driver_series',
                 'cann_target_series', 'cann_target')

    count: int
    npus: Tuple[GpuFacts, ...]
    cann_installed: Optional[bool]
    cann_version: Optional[str]
    cann_series: Optional[str]
    driver_series: Optional[str]
    cann_target_series: Optional[str]
    cann_target: Optional[str]

    def __init__(self, count: int = 0, npus: Tuple[GpuFacts, ...] = (),
                       cann_installed: Optional[bool] = None, cann_version: Optional[str] = None,
                       cann_series: Optional[str] = None, driver_series: Optional[str] = None,
                       cann_target_series: Optional[str] = None, cann_target: Optional[str] = None) -> None:
        self.count = count
        self.npus = npus
        self.cann_installed = cann_installed
        self.cann_version = cann_version
        self.cann_series = cann_series
        self.driver_series = driver_series
        self.cann_target_series = cann_target_series
        self.cann_target = cann_target


class Count(View):
    """How many of a kind (`apple.count`)."""

    __slots__ = ('count',)

    count: int

    def __init__(self, count: int = 0) -> None:
        self.count = count


class MetalGpu(View):
    """A GPU Metal can use; `inferred` when the capture lists none and an Apple chip implies one."""

    __slots__ = ('vendor', 'name', 'integrated', 'inferred')

    vendor: Optional[str]
    name: Optional[str]
    integrated: Optional[bool]
    inferred: bool

    def __init__(self, vendor: Optional[str] = None, name: Optional[str] = None,
                       integrated: Optional[bool] = None, inferred: bool = False) -> None:
        self.vendor = vendor
        self.name = name
        self.integrated = integrated
        self.inferred = inferred


class MetalView(View):
    __slots__ = ('count', 'gpus')

    count: int
    gpus: Tuple[MetalGpu, ...]

    def __init__(self, count: int = 0, gpus: Tuple[MetalGpu, ...] = ()) -> None:
        self.count = count
        self.gpus = gpus


class OpenClDeviceView(View):
    """An OpenCL device with its platform's name; `integrated` from the OpenCL flag, else from the
    GPU of the same name."""

    __slots__ = ('name', 'vendor', 'type', 'platform', 'integrated')

    name: Optional[str]
    vendor: Optional[str]
    type: Optional[str]
    platform: Optional[str]
    integrated: Optional[bool]

    def __init__(self, name: Optional[str] = None, vendor: Optional[str] = None, type: Optional[str] = None,
                       platform: Optional[str] = None, integrated: Optional[bool] = None) -> None:
        self.name = name
        self.vendor = vendor
        self.type = type
        self.platform = platform
        self.integrated = integrated


class OpenClView(View):
    """Whether the scan read OpenCL at all, its devices, and the GPU devices among them."""

    __slots__ = ('known', 'devices', 'gpu_devices', 'gpu_count', 'unregistered_icds')

    known: bool
    devices: Tuple[OpenClDeviceView, ...]
    gpu_devices: Tuple[OpenClDeviceView, ...]
    gpu_count: int
    unregistered_icds: Tuple[str, ...]

    def __init__(self, known: bool = False, devices: Tuple[OpenClDeviceView, ...] = (),
                       gpu_devices: Tuple[OpenClDeviceView, ...] = (), gpu_count: int = 0,
                       unregistered_icds: Tuple[str, ...] = ()) -> None:
        self.known = known
        self.devices = devices
        self.gpu_devices = gpu_devices
        self.gpu_count = gpu_count
        self.unregistered_icds = unregistered_icds


class UsbView(View):
    """USB accelerator sticks and their kinds."""

    __slots__ = ('count', 'kinds', 'devices')

    count: int
    kinds: Tuple[str, ...]
    devices: Tuple[UsbAccelerator, ...]

    def __init__(self, count: int = 0, kinds: Tuple[str, ...] = (),
                       devices: Tuple[UsbAccelerator, ...] = ()) -> None:
        self.count = count
        self.kinds = kinds
        self.devices = devices


class RulesContext(View):
    """Everything a condition may read, derived from the scan's Facts (plan/context.py) with the few
    inferences a partial capture allows, each said in `inferred`."""

    __slots__ = ('os', 'cpu', 'python', 'gpus', 'nvidia', 'jetson', 'amd', 'intel', 'ascend', 'apple', 'metal',
                 'directml', 'opencl', 'frameworks', 'usb', 'inferred')

    os: OsFacts
    cpu: CpuView
    python: PythonTarget
    gpus: Tuple[GpuFacts, ...]
    nvidia: NvidiaView
    jetson: Optional[JetsonInfo]
    amd: AmdView
    intel: GpuGroup
    ascend: AscendView
    apple: Count
    metal: MetalView
    directml: DirectMlView
    opencl: OpenClView
    frameworks: Mapping[str, FrameworkFacts]
    usb: UsbView
    inferred: Tuple[str, ...]

    def __init__(self, os: OsFacts, cpu: CpuView, python: PythonTarget, gpus: Tuple[GpuFacts, ...],
                       nvidia: NvidiaView, jetson: Optional[JetsonInfo], amd: AmdView, intel: GpuGroup,
                       ascend: AscendView, apple: Count, metal: MetalView, directml: DirectMlView,
                       opencl: OpenClView, frameworks: Mapping[str, FrameworkFacts], usb: UsbView,
                       inferred: Tuple[str, ...] = ()) -> None:
        self.os = os
        self.cpu = cpu
        self.python = python
        self.gpus = gpus
        self.nvidia = nvidia
        self.jetson = jetson
        self.amd = amd
        self.intel = intel
        self.ascend = ascend
        self.apple = apple
        self.metal = metal
        self.directml = directml
        self.opencl = opencl
        self.frameworks = frameworks
        self.usb = usb
        self.inferred = inferred


__all__ = ["View", "AmdGpu", "AmdView", "AscendView", "BusGpu", "Count", "CpuView", "DirectMlView", "GpuGroup", "MetalGpu",
           "MetalView", "NvidiaGpu", "NvidiaView", "OpenClDeviceView", "OpenClView", "PythonTarget", "RulesContext",
           "UsbView"]
