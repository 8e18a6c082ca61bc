"""Generic PCI view of accelerators: `lspci -nn` and the DRM cards in sysfs (drm-drivers.txt).

Every vendor's display-class devices show up here, with or without a working driver, so this probe
names GPUs the vendor tools cannot see. It adds no API: a device on the PCI bus proves nothing about
CUDA, ROCm or oneAPI (the vendor probes and OpenCL decide that).

Display classes kept: 0300 VGA, 0302 3D, 0380 Display, 1200 Processing accelerators. Everything
else (host bridges, audio [0403], NPUs [1180], ...) is not a GPU. Emulated, paravirtual and BMC
display adapters (VMware SVGA, QEMU std VGA, Cirrus, ASPEED, Matrox G200, Hyper-V / WSL's Basic
Render Driver, virtio-gpu, QXL, VirtualBox; knowledge/pci_display.json) are left out: they are
never compute accelerators and would only confuse the device count.

Intel integrated or discrete: by device id from intel_gpus.json (the Intel probe's table, Mesa's
has_local_mem), else the discrete ids of pci_display.json (Linux's pciids.h), else by slot: Intel's
integrated GPU sits at 00:02.0. AMD: gfx target and APU-ness from amd_gfx.json.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, List, Optional, Set, Tuple

from ..model import knowledge as kb
from ..errors import ParseError
from ..model.facts import Contribution, GpuFacts
from ..scan.capture import Host
from ..model.vendors import normalise_bus_id, vendor_from_pci, vendor_from_text
from ._util import nothing_read, parse_capture
from ..model.hw.amd import amd_device, architecture_of
from ._util import clean_lines

ACCELERATOR_CLASSES = {
    "0300": "VGA compatible controller",
    "0302": "3D controller",
    "0380": "Display controller",
    "1200": "Processing accelerators",
}
_CLASS_BY_NAME = {v.lower(): k for k, v in ACCELERATOR_CLASSES.items()}

# Vendor names as lspci prints them (pci.ids), so the device name can be split from the vendor's.
_VENDOR_PREFIXES = (
    "Advanced Micro Devices, Inc. [AMD/ATI]", "Advanced Micro Devices, Inc. [AMD]", "NVIDIA Corporation",
    "Intel Corporation", "Matrox Electronics Systems Ltd.", "ASPEED Technology, Inc.", "Red Hat, Inc.",
    "Microsoft Corporation", "Habana Labs Ltd.", "Huawei Technologies Co., Ltd.", "Qualcomm Technologies, Inc",
    "Moore Threads Technology Co.,Ltd", "VMware", "Cirrus Logic", "InnoTek Systemberatung GmbH",
)


@dataclass(frozen=True)
class PciDevice:
    bus_id: str  # "0000:03:00.0"
    class_code: Optional[str]  # "0300"
    class_name: str
    description: str  # vendor + device text
    vendor_id: Optional[str] = None  # "0x1002"
    device_id: Optional[str] = None  # "0x73df"
    revision: Optional[str] = None  # "0xc1"

    @property
    def is_accelerator_class(self) -> bool:
        if self.class_code is not None:
            return self.class_code in ACCELERATOR_CLASSES
        return self.class_name.lower() in _CLASS_BY_NAME

    @property
    def vendor_text(self) -> Optional[str]:
        for prefix in _VENDOR_PREFIXES:
            if self.description.startswith(prefix):
                return prefix
        return None

    @property
    def name(self) -> Optional[str]:
        """The marketing text: 'Navi 22 [Radeon RX 6700/6700 XT/6750 XT / 6800M/6850M XT]' ->
        'Radeon RX 6700/6700 XT/6750 XT / 6800M/6850M XT'; no brackets -> the device text."""
        rest = self.description
        vendor = self.vendor_text
        if vendor:
            rest = rest[len(vendor):].strip()
        m = re.match(r"^(.*?)\s*\[([^\[\]]+)\]$", rest)
        if m and m.group(1) and not re.fullmatch(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{4}", m.group(2)):
            return m.group(2).strip()
        if not rest or re.fullmatch(r"Device [0-9a-fA-F]{4}", rest):
            return None  # lspci's pci.ids does not know the device
        return rest


_LSPCI = re.compile(
    r"^(?P<bus>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls>[^\[:]+?)(?:\s+\[(?P<code>[0-9a-fA-F]{4})\])?:\s+(?P<desc>.*?)"
    r"(?:\s+\[(?P<ven>[0-9a-fA-F]{4}):(?P<dev>[0-9a-fA-F]{4})\])?"
    r"(?:\s+\(rev\s+(?P<rev>[0-9a-fA-F]{2})\))?(?:\s+\(prog-if[^)]*\)\)?)?\s*$"
)


def parse_lspci(text: str) -> List[PciDevice]:
    """`lspci -nn` (plain `lspci` too, then without ids) -> every device line."""
    out: List[PciDevice] = []
    seen: Set[str] = set()
    nonblank = 0
    for line in clean_lines(text):
        if not line.strip():
            continue
        nonblank += 1
        m = _LSPCI.match(line.strip())
        if not m:
            continue
        bus = normalise_bus_id(m.group("bus"))
        if bus is None or bus in seen:
            continue
        seen.add(bus)
        out.append(PciDevice(
            bus_id=bus,
            class_code=m.group("code").lower() if m.group("code") else None,
            class_name=m.group("cls").strip(),
            description=m.group("desc").strip(),
            vendor_id=f"0x{m.group('ven').lower()}" if m.group("ven") else None,
            device_id=f"0x{m.group('dev').lower()}" if m.group("dev") else None,
            revision=f"0x{m.group('rev').lower()}" if m.group("rev") else None,
        ))
    if nonblank and not out:
        raise ParseError("not lspci output (no `bus:dev.fn class: description` lines)")
    return out


@dataclass(frozen=True)
class DrmCard:
    card: str  # "card0"
    bus_id: Optional[str]
    vendor_id: Optional[str]
    device_id: Optional[str]
    driver: Optional[str]  # "amdgpu", "i915", "xe", "nvidia", "nouveau", "vfio-pci", ...


def parse_drm_drivers(text: str) -> List[DrmCard]:
    """drm-drivers.txt: `card0 0000:03:00.0 0x1002 0x73df amdgpu` per DRM card (from sysfs)."""
    from ..model.vendors import hex_id

    out: List[DrmCard] = []
    seen: Set[str] = set()
    nonblank = 0
    for line in clean_lines(text):
        parts = line.split()
        if not parts:
            continue
        nonblank += 1
        idx = next((i for i, p in enumerate(parts) if re.fullmatch(r"card\d+", p)), None)
        if idx is None or len(parts) < idx + 5:
            continue
        card, bus, ven, dev, drv = parts[idx:idx + 5]
        if card in seen or (bus != "-" and bus in seen) or not re.fullmatch(r"0x[0-9a-fA-F]{4}", ven) or not re.fullmatch(r"0x[0-9a-fA-F]{4}", dev):
            continue
        seen.update((card, bus))
        out.append(DrmCard(card, normalise_bus_id(bus), hex_id(ven), hex_id(dev),
                           None if drv == "-" else drv))
    if nonblank and not out:
        raise ParseError("not drm-drivers output (no `cardN bus vendor device driver` lines)")
    return out


# -- knowledge ---------------------------------------------------------------------------------


def _knowledge() -> Dict[str, Any]:
    return kb.table("pci_display")


@lru_cache(maxsize=1)
def _intel_discrete_flags() -> Dict[str, bool]:
    """intel_gpus.json (the Intel probe's table, from Mesa's has_local_mem): device id -> discrete."""
    return {r["pci_device_id"].lower(): r["discrete"] for r in kb.rows("intel_gpus")
            if isinstance(r.get("pci_device_id"), str) and isinstance(r.get("discrete"), bool)}


def virtual_display(vendor_id: Optional[str], device_id: Optional[str]) -> Optional[str]:
    """The kind of emulated / paravirtual / BMC adapter ('vmware', 'bmc', ...) or None."""
    if not vendor_id:
        return None
    for row in _knowledge().get("virtual_display", []):
        if row.get("pci_vendor_id") != vendor_id.lower():
            continue
        if row.get("pci_device_id") in (None, (device_id or "").lower()):
            return str(row.get("kind") or "virtual")
    return None


def intel_discrete(device_id: Optional[str]) -> Optional[str]:
    """Intel discrete family ('DG2', 'BMG', ...) of a PCI device id, or None."""
    for row in _knowledge().get("intel_discrete", []):
        if device_id and row.get("pci_device_id") == device_id.lower():
            return str(row.get("family"))
    return None


# -- facts -------------------------------------------------------------------------------------

_DRIVER_NOTES = {
    "radeon": "bound to the legacy `radeon` kernel driver; ROCm and current OpenCL need `amdgpu`",
    "nouveau": "bound to `nouveau`; CUDA needs NVIDIA's own kernel driver",
    "vfio-pci": "bound to vfio-pci (reserved for a virtual machine): not usable on this host",
    "pci-stub": "bound to pci-stub (hidden from the host): not usable here",
}


def _vendor(vendor_id: Optional[str], text: Optional[str]) -> str:
    v = vendor_from_pci(vendor_id) or vendor_from_text(text)
    if v:
        return v
    word = re.sub(r"[^a-z0-9]", "", (text or "").split(" ")[0].lower()) if text else ""
    return word or "unknown"


def _integrated(vendor: str, bus: str, device_id: Optional[str], table: Optional[bool]) -> Optional[bool]:
    if vendor == "amd":
        return table
    if vendor == "intel":
        flag = _intel_discrete_flags().get((device_id or "").lower())
        if flag is not None:
            return not flag
        if intel_discrete(device_id):
            return False
        if bus.endswith(":00:02.0"):
            return True  # Intel's integrated GPU sits at 00:02.0
    return None


def gpu_facts(dev: Optional[PciDevice], card: Optional[DrmCard]) -> Optional[GpuFacts]:
    """One accelerator from an lspci line and/or its DRM card; None for virtual adapters."""
    bus = (dev.bus_id if dev else None) or (card.bus_id if card else None)
    vendor_id = (dev.vendor_id if dev else None) or (card.vendor_id if card else None)
    device_id = (dev.device_id if dev else None) or (card.device_id if card else None)
    if virtual_display(vendor_id, device_id):
        return None
    vendor = _vendor(vendor_id, dev.description if dev else None)
    if vendor in ("vmware", "qemu", "aspeed", "matrox", "microsoft", "virtio"):
        return None  # known by name though lspci printed no ids
    revision = dev.revision if dev else None
    gfx, table_integrated = amd_device(device_id, revision) if vendor == "amd" else (None, None)
    notes: Tuple[str, ...] = ()
    driver = card.driver if card else None
    if driver in _DRIVER_NOTES:
        notes = (_DRIVER_NOTES[driver],)
    name = dev.name if dev else None
    arch = architecture_of(gfx)
    if vendor == "intel":
        # lspci prints the chip's code name ("AlderLake-S GT1"); the runtimes print the product
        # ("Intel(R) UHD Graphics 770"): the Intel table's name makes both one device in the merge.
        from ..model.hw.intel import intel_gpu_info

        info = intel_gpu_info(device_id)
        if info is not None:
            name = str(info.get("name") or "") or name
            arch = info.get("generation") or arch
    return GpuFacts(
        vendor=vendor,
        name=name,
        gfx_target=gfx,
        integrated=_integrated(vendor, bus or "", device_id, table_integrated),
        architecture=arch,
        pci_bus_id=bus,
        pci_vendor_id=vendor_id,
        pci_device_id=device_id,
        sources=("pci",),
        notes=notes,
    )


def gpus_from(devices: List[PciDevice], cards: List[DrmCard]) -> List[GpuFacts]:
    by_bus = {c.bus_id: c for c in cards if c.bus_id}
    out: List[GpuFacts] = []
    used: Set[str] = set()
    for d in devices:
        if not d.is_accelerator_class:
            continue
        if d.class_code is not None and d.vendor_id is None:
            continue  # an `lspci -nn` line cut short: without its ids it cannot be told from a virtual one
        if d.class_code is None and d.vendor_text is None and vendor_from_text(d.description) is None:
            continue  # plain `lspci` naming no vendor mlprobe knows
        card = by_bus.get(d.bus_id)
        if card is not None and card.bus_id:
            used.add(card.bus_id)
        g = gpu_facts(d, card)
        if g is not None:
            out.append(g)
    if not devices:  # no lspci: the DRM cards alone (sysfs lists only display devices)
        for c in cards:
            if c.bus_id in used:
                continue
            g = gpu_facts(None, c)
            if g is not None:
                out.append(g)
    return out


def probe(host: Host) -> Contribution:
    out = Contribution()
    errors: List[str] = []
    devices = parse_capture(host, "lspci.txt", parse_lspci, errors)
    cards = parse_capture(host, "drm-drivers.txt", parse_drm_drivers, errors)
    if devices is None and cards is None:
        return nothing_read(out, errors, "no lspci and no DRM cards in sysfs")
    out.gpus = gpus_from(devices or [], cards or [])
    out.warnings.extend(errors)
    return out


__all__ = [
    "DrmCard",
    "PciDevice",
    "gpus_from",
    "intel_discrete",
    "parse_drm_drivers",
    "parse_lspci",
    "probe",
    "virtual_display",
]
