"""macOS GPUs from `system_profiler SPDisplaysDataType` (text or `-json`).

Covers Apple Silicon GPUs and the AMD, Intel and NVIDIA GPUs of Intel Macs; the vendor field tells
them apart. Monitors listed under a GPU ("Displays:" / `spdisplays_ndrvs`) are not GPUs.

Memory rule: `memory_bytes` is set only for a GPU that is not on the built-in bus (Bus: PCIe, PCI,
Thunderbolt), i.e. a discrete GPU with VRAM of its own; macOS prints its size as "VRAM (Total)" or,
on some versions (10.13), as "VRAM (Dynamic, Max)". A Built-In GPU (Intel iGPU, Apple Silicon) gets
none: what macOS prints for it ("VRAM (Dynamic, Max): 1536 MB") is a cap on shared system memory, and
Apple Silicon prints no VRAM line at all (unified memory).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ParseError
from ..model.facts import Contribution, GpuFacts, MetalRuntime, Runtimes
from ..scan.capture import Host
from ..model.vendors import hex_id, vendor_from_pci, vendor_from_text
from ._util import clean_text, first_parsed, load_json, nothing_read

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT])i?B\b", re.I)
_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


@dataclass
class MacGpu:
    """One GPU as system_profiler describes it (before it becomes GpuFacts)."""

    name: Optional[str] = None
    vendor: Optional[str] = None  # apple, amd, intel, nvidia, ...
    pci_vendor_id: Optional[str] = None
    pci_device_id: Optional[str] = None
    bus: Optional[str] = None  # "Built-In", "PCIe", ...
    vram_bytes: Optional[int] = None
    vram_label: Optional[str] = None  # "VRAM (Total)", "VRAM (Dynamic, Max)", "spdisplays_vram", ...
    cores: Optional[int] = None
    metal: Optional[str] = None  # "Metal 3", "Metal GPUFamily Apple 7", "macOS GPUFamily2 v1"
    metal_supported: Optional[bool] = None
    notes: List[str] = field(default_factory=list)

    @property
    def integrated(self) -> Optional[bool]:
        if self.bus:
            return self.bus.strip().lower().replace("-", "") in ("builtin", "built in")
        if self.vendor == "apple":
            return True  # Apple GPUs exist only inside Apple's SoCs
        return None

    def to_facts(self) -> GpuFacts:
        integrated = self.integrated
        memory = self.vram_bytes if integrated is False else None
        return GpuFacts(
            vendor=self.vendor or "unknown", name=self.name, memory_bytes=memory, integrated=integrated,
            apis=("metal",) if self.metal_supported else (), pci_vendor_id=self.pci_vendor_id,
            pci_device_id=self.pci_device_id, cores=self.cores,
            metal_support=self.metal if self.metal_supported else None,
            sources=("apple",), notes=tuple(self.notes),
        )


def _size_bytes(value: str) -> Optional[int]:
    m = _SIZE.search(value)
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _vendor(value: str) -> Tuple[Optional[str], Optional[str]]:
    """'AMD (0x1002)' / 'Intel' / 'Apple (0x106b)' / 'sppci_vendor_Apple' -> (vendor, '0x1002')."""
    pci = None
    m = re.search(r"\(?\b0x([0-9a-fA-F]{1,4})\)?", value)
    if m:
        pci = hex_id(m.group(1))
    text = re.sub(r"^s?p?pci_vendor_|^spdisplays_vendor_", "", value.strip(), flags=re.I)
    return (vendor_from_pci(pci) or vendor_from_text(text.replace("_", " ")), pci)


def _metal(key: str, value: str) -> Tuple[Optional[bool], Optional[str]]:
    """("Metal Support", "Metal 3") -> (True, "Metal 3"); ("Metal", "Supported, feature set macOS
    GPUFamily2 v1") -> (True, "macOS GPUFamily2 v1"); "Not Supported" -> (False, None)."""
    v = value.strip()
    low = v.lower()
    if not v:
        return None, None
    if "not supported" in low or low in ("no", "spdisplays_notsupported", "spdisplays_no"):
        return False, None
    # JSON tokens: spdisplays_metal3, spdisplays_mtlgpufamilyapple7, spdisplays_metalfeaturesetfamily13, ...
    m = re.fullmatch(r"spdisplays_metal(\d+)", low)
    if m:
        return True, f"Metal {m.group(1)}"
    m = re.fullmatch(r"spdisplays_mtlgpufamily(apple|mac|macos)(\d+)", low)
    if m:
        return True, f"Metal GPUFamily {'Apple' if m.group(1) == 'apple' else 'macOS'} {m.group(2)}"
    if low in ("spdisplays_supported", "supported"):
        return True, "Supported"
    if low.startswith("spdisplays_"):
        return True, v[len("spdisplays_"):]
    rest = re.sub(r"^supported\s*,?\s*(feature set\s*)?", "", v, flags=re.I).strip()
    return True, rest or "Supported"


def _take(gpu: MacGpu, key: str, value: str) -> None:
    k = key.strip().lower()
    if k == "chipset model":
        gpu.name = value or gpu.name
    elif k == "vendor":
        vendor, pci = _vendor(value)
        gpu.vendor = vendor or gpu.vendor
        gpu.pci_vendor_id = pci or gpu.pci_vendor_id
    elif k == "device id":
        gpu.pci_device_id = hex_id(value.strip()) or gpu.pci_device_id
    elif k == "bus":
        gpu.bus = value or gpu.bus
    elif k == "total number of cores":
        m = re.match(r"\s*(\d+)", value)
        if m:
            gpu.cores = int(m.group(1))
    elif k.startswith("vram"):
        size = _size_bytes(value)
        # Prefer "VRAM (Total)" when a GPU prints both labels.
        if size is not None and (gpu.vram_bytes is None or "total" in k):
            gpu.vram_bytes, gpu.vram_label = size, key.strip()
    elif k in ("metal", "metal support", "metal family"):
        supported, metal = _metal(key, value)
        if supported is not None and (gpu.metal_supported is None or k == "metal support"):
            gpu.metal_supported, gpu.metal = supported, metal


def _finish(gpu: MacGpu) -> MacGpu:
    if gpu.vendor is None:
        gpu.vendor = vendor_from_text(gpu.name)
    return gpu


def parse_system_profiler_text(text: str) -> List[MacGpu]:
    """`system_profiler SPDisplaysDataType` -> one MacGpu per "Chipset Model:" block.

    The GPU's attributes are the lines indented like its "Chipset Model:" line; deeper lines (the
    monitors under "Displays:") are skipped; a shallower line (the next GPU's heading) ends the block.
    Empty output (a Mac VM without a GPU) is no GPU, not an error."""
    text = clean_text(text)
    if not text.strip():
        return []
    if "chipset model" not in text.lower() and "graphics/displays" not in text.lower():
        raise ParseError("system_profiler output has no Graphics/Displays section and no Chipset Model")
    gpus: List[MacGpu] = []
    cur: Optional[MacGpu] = None
    indent: Optional[int] = None
    heading: Optional[str] = None
    taken = 0  # attribute lines read since the current GPU's "Chipset Model:"
    for raw in text.split("\n"):
        line = raw.expandtabs(4)
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip(" "))
        body = line.strip()
        m = re.match(r"^([^:]+):\s*(.*)$", body)
        if m and m.group(1).strip().lower() == "chipset model":
            if cur is None or taken > 0:  # the same line twice in a row is still one GPU
                cur = MacGpu()
                if heading:
                    cur.name = heading
                gpus.append(cur)
            indent, taken = depth, 0
            _take(cur, m.group(1), m.group(2).strip())
            continue
        if cur is None or indent is None:
            if m and not m.group(2).strip():
                heading = m.group(1).strip()  # "Radeon Pro 450:" before its "Chipset Model:"
            continue
        if depth < indent:
            cur, indent = None, None  # the next GPU's heading (or the end of the section)
            if m and not m.group(2).strip():
                heading = m.group(1).strip()
            continue
        if depth > indent or not m:
            continue  # a monitor's attribute under "Displays:", or noise
        _take(cur, m.group(1), m.group(2).strip())
        taken += 1
    return [_finish(g) for g in gpus]


def _json_gpu(item: Dict[str, Any]) -> Optional[MacGpu]:
    def s(key: str) -> Optional[str]:
        v = item.get(key)
        return v.strip() if isinstance(v, str) and v.strip() else None

    model = s("sppci_model")
    name = s("_name")
    vendor_raw = s("spdisplays_vendor") or s("sppci_vendor")
    device_type = s("sppci_device_type")
    if not model and not vendor_raw and (device_type or "").lower() not in ("spdisplays_gpu", "spdisplays_egpu"):
        return None  # not a GPU entry
    gpu = MacGpu(name=model or (name if name and not name.startswith("kHW_") else None))
    if vendor_raw:
        _take(gpu, "Vendor", vendor_raw)
    dev = s("spdisplays_device-id") or s("sppci_device-id")
    if dev:
        _take(gpu, "Device ID", dev)
    bus = s("sppci_bus")
    if bus:
        gpu.bus = {"spdisplays_builtin": "Built-In", "spdisplays_pcie": "PCIe", "spdisplays_pci": "PCI",
                   "spdisplays_thunderbolt": "Thunderbolt"}.get(bus.lower(), bus.replace("spdisplays_", ""))
    cores = s("sppci_cores")
    if cores:
        _take(gpu, "Total Number of Cores", cores)
    for key, label in (("spdisplays_vram", "VRAM (Total)"), ("_spdisplays_vram", "VRAM (Total)"),
                       ("spdisplays_vram_shared", "VRAM (Dynamic, Max)"),
                       ("spdisplays_vram_dynamic", "VRAM (Dynamic, Max)")):
        v = s(key)
        if v and gpu.vram_bytes is None:
            _take(gpu, label, v)
    for key, label in (("spdisplays_mtlgpufamilysupport", "Metal Support"), ("spdisplays_metalfamily", "Metal Family"),
                       ("spdisplays_metal", "Metal")):
        v = s(key)
        if v:
            _take(gpu, label, v)
    if gpu.name is None and name and name.startswith("kHW_"):
        gpu.notes.append(f"system_profiler names this GPU only by the key {name}")
    return _finish(gpu)


def parse_system_profiler_json(text: str) -> List[MacGpu]:
    """`system_profiler -json SPDisplaysDataType` -> one MacGpu per GPU entry."""
    doc = load_json(text, "system_profiler -json output", skip_to="{")
    if not isinstance(doc, dict) or not isinstance(doc.get("SPDisplaysDataType"), list):
        raise ParseError("system_profiler -json output has no SPDisplaysDataType list")
    out = []
    for item in doc["SPDisplaysDataType"]:
        if isinstance(item, dict):
            gpu = _json_gpu(item)
            if gpu is not None:
                out.append(gpu)
    return out


def metal_runtime(gpus: List[MacGpu]) -> Optional[MetalRuntime]:
    """runtimes["metal"]: what Metal the Mac offers, led by its Apple GPU if it has one."""
    supported = [g for g in gpus if g.metal_supported]
    if not supported:
        return None
    apple = [g for g in supported if g.vendor == "apple"]
    lead = (apple or supported)[0]
    return MetalRuntime.of(support=lead.metal, apple_gpu=bool(apple), gpu=lead.name)


def probe(host: Host) -> Contribution:
    out = Contribution()
    errors: List[str] = []
    gpus = first_parsed(host, (("system_profiler-SPDisplaysDataType.json", parse_system_profiler_json),
                               ("system_profiler-SPDisplaysDataType.txt", parse_system_profiler_text)), errors)
    if gpus is None:
        return nothing_read(out, errors, "system_profiler not available (not macOS)")
    out.gpus = [g.to_facts() for g in gpus]
    metal = metal_runtime(gpus)
    if metal is not None:
        out.runtimes = Runtimes(metal=metal)
    return out


__all__ = ["MacGpu", "parse_system_profiler_text", "parse_system_profiler_json", "metal_runtime", "probe"]
