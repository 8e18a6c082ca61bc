"""The rules context as typed records: what the recipes' conditions and the named tests read
(`{"fact": "nvidia.count"}`, `{nvidia.count}` in a sentence). plan/context.py derives one from the scan's
`Facts`; knowledge/registry.json (`facts`) lists the paths a recipe may name.

Where a view is the scan's own record (`os` is the scan's OsFacts with the inferred system, `gpus`,
`intel.gpus`, `directml.gpus`, `ascend.npus` are its GpuFacts, `frameworks` its FrameworkFacts), a field
added to that record reaches the conditions with no edit here: adding a fact is the field and its
line in the registry."""

from __future__ import annotations

from typing import Mapping, Optional, Tuple

from .contract import contract, Record
from .facts import FrameworkFacts, GpuFacts, JetsonInfo, OsFacts, UsbAccelerator


@contract
class CpuView(Record):
    """The CPU as the rules read it: the architecture normalised (x86_64, arm64), the flags (None
    when unknown, or settled by the x86-64 level or the CPU family)."""

    arch: Optional[str] = None
    flags: Optional[Tuple[str, ...]] = None
    x86_64_level: Optional[int] = None
    vendor: Optional[str] = None
    model: Optional[str] = None


@contract
class PythonTarget(Record):
    """The Python the plan is for (X.Y), where that came from (--python, the scan) and what the scan
    found."""

    version: Optional[str] = None
    source: Optional[str] = None
    scanned: Optional[str] = None


@contract
class NvidiaGpu(Record):
    """An NVIDIA GPU the driver drives: its compute capability (the probe's, or from its name)."""

    name: Optional[str] = None
    cc: Optional[str] = None
    driver: Optional[str] = None
    mig: bool = False
    integrated: Optional[bool] = None


@contract
class BusGpu(Record):
    """A GPU lspci lists and the driver does not drive."""

    name: Optional[str] = None
    pci_bus_id: Optional[str] = None


@contract
class NvidiaView(Record):
    """The NVIDIA GPUs CUDA can use, the driver, the CUDA version it supports, its kernel module."""

    count: int = 0
    gpus: Tuple[NvidiaGpu, ...] = ()
    driver: Optional[str] = None
    cuda_version: Optional[str] = None
    kernel_module: Optional[str] = None
    mig: bool = False
    names: Tuple[Optional[str], ...] = ()
    undriven: Tuple[BusGpu, ...] = ()


@contract
class AmdGpu(Record):
    """An AMD GPU: its gfx target (the hardware's, else the runtime's), the runtime's, and its place
    among the AMD GPUs (ROCm's device index), UUID and KFD node."""

    name: Optional[str] = None
    gfx: Optional[str] = None
    runtime_gfx: Optional[str] = None
    integrated: bool = False
    index: int = 0
    uuid: Optional[str] = None
    node: Optional[int] = None


@contract
class AmdView(Record):
    """The AMD GPUs; the discrete ones are the targets when there are any, the others are `others`."""

    count: int = 0
    gpus: Tuple[AmdGpu, ...] = ()
    targets: Tuple[AmdGpu, ...] = ()
    others: Tuple[AmdGpu, ...] = ()
    gfx: Tuple[str, ...] = ()


@contract
class GpuGroup(Record):
    """The GPUs of one kind (Intel, DirectML-capable) as the scan has them."""

    count: int = 0
    gpus: Tuple[GpuFacts, ...] = ()


@contract
class DirectMlView(Record):
    """The GPUs DirectML can use, and whether one is discrete."""

    count: int = 0
    gpus: Tuple[GpuFacts, ...] = ()
    discrete: bool = False


@contract
class AscendView(Record):
    """Huawei Ascend NPUs and the CANN toolkit: its version ("8.3.RC2") and series ("8.3")."""

    count: int = 0
    npus: Tuple[GpuFacts, ...] = ()
    cann_installed: Optional[bool] = None
    cann_version: Optional[str] = None
    cann_series: Optional[str] = None


@contract
class Count(Record):
    """How many of a kind (`apple.count`)."""

    count: int = 0


@contract
class MetalGpu(Record):
    """A GPU Metal can use; `inferred` when the capture lists none and an Apple chip implies one."""

    vendor: Optional[str] = None
    name: Optional[str] = None
    integrated: Optional[bool] = None
    inferred: bool = False


@contract
class MetalView(Record):
    count: int = 0
    gpus: Tuple[MetalGpu, ...] = ()


@contract
class OpenClDeviceView(Record):
    """An OpenCL device with its platform's name; `integrated` from the OpenCL flag, else from the
    GPU of the same name."""

    name: Optional[str] = None
    vendor: Optional[str] = None
    type: Optional[str] = None
    platform: Optional[str] = None
    integrated: Optional[bool] = None


@contract
class OpenClView(Record):
    """Whether the scan read OpenCL at all, its devices, and the GPU devices among them."""

    known: bool = False
    devices: Tuple[OpenClDeviceView, ...] = ()
    gpu_devices: Tuple[OpenClDeviceView, ...] = ()
    gpu_count: int = 0


@contract
class UsbView(Record):
    """USB accelerator sticks and their kinds."""

    count: int = 0
    kinds: Tuple[str, ...] = ()
    devices: Tuple[UsbAccelerator, ...] = ()


@contract
class RulesContext(Record):
    """Everything a condition may read, derived from the scan's Facts (plan/context.py) with the few
    inferences a partial capture allows, each said in `inferred`."""

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
    inferred: Tuple[str, ...] = ()


__all__ = ["AmdGpu", "AmdView", "AscendView", "BusGpu", "Count", "CpuView", "DirectMlView", "GpuGroup", "MetalGpu",
           "MetalView", "NvidiaGpu", "NvidiaView", "OpenClDeviceView", "OpenClView", "PythonTarget", "RulesContext",
           "UsbView"]
