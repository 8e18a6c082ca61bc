"""One display adapter as Windows describes it (dxdiag's Display Devices, Win32_VideoController): the
record, the PCI identity in its device key or PNPDeviceID, the names of adapters that are not GPUs
(remote-desktop, streaming, virtual displays), and the values Windows writes for "none"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from ..model.hw.display import not_gpu_name_pattern

# Win32_VideoController.AdapterRAM is a uint32; Windows reports 0xFFF00000 (4 GiB - 1 MiB) for
# anything larger (oshi/oshi#2521: an RTX 4090 reads 4293918720; Jinjinov/Hardware.Info#40).
ADAPTER_RAM_CAP = 0xFFF00000
GPU_VENDORS = ("nvidia", "amd", "intel", "qualcomm", "arm", "apple", "moorethreads")
D3D12_VENDORS = ("nvidia", "amd", "intel", "qualcomm")
# Software, remote-desktop, streaming and virtual-monitor adapters. Some copy the real card's vendor and
# device ids into dxdiag's id lines; their Device Key / PNPDeviceID is not PCI\\VEN_ (ROOT\\..., SWD\\...),
# which already keeps them out; the names catch the rest (pci_display.json `virtual_display_names`, one
# sourced row per product, read by model/hw/display.py).
_NOT_GPU_NAME = not_gpu_name_pattern()
_PCI_ID = re.compile(
    r"PCI\\VEN_([0-9A-Fa-f]{4})&DEV_([0-9A-Fa-f]{4})(?:&SUBSYS_([0-9A-Fa-f]{8}))?"
    r"(?:&REV_([0-9A-Fa-f]{2}))?(\\[^\s,]*)?"
)


@dataclass
class Adapter:
    """One display adapter as Windows reports it (one dxdiag Display Device or one WMI record)."""

    name: Optional[str] = None
    manufacturer: Optional[str] = None
    pci_vendor_id: Optional[str] = None  # "0x10de"
    pci_device_id: Optional[str] = None
    subsys: Optional[str] = None
    revision: Optional[str] = None  # "0xa1"
    pci: Optional[bool] = False  # a PCI device; None when the capture does not say (no PNPDeviceID)
    driver_version_raw: Optional[str] = None
    driver_date: Optional[str] = None  # "2025-06-30"; "2025" where the capture's day and month are ambiguous
    dedicated_mib: Optional[int] = None
    adapter_ram: Optional[int] = None  # WMI's uint32 value
    ddi_version: Optional[int] = None
    feature_levels: Tuple[str, ...] = ()
    driver_model: Optional[str] = None  # "WDDM 2.7"
    hybrid: Optional[str] = None  # dxdiag: Integrated / Discrete / Not Supported
    vendor_driver: bool = True  # False for Microsoft Basic Display Adapter on a real GPU
    cuda_driver: bool = False  # dxdiag lists nvcuda.dll for this device
    count: int = 1  # physical cards with this identity
    pnp: Optional[str] = None  # WMI's PNPDeviceID (one per adapter instance)


def _na(value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    v = value.strip()
    return None if v.lower() in ("", "n/a", "unknown", "none", "not available", "null") else v


def _pci_parts(text: Optional[str]) -> Optional[Tuple[str, str, Optional[str], Optional[str], str]]:
    """`PCI\\VEN_10DE&DEV_2204&SUBSYS_147D10DE&REV_A1\\4&...` -> (ven, dev, subsys, rev, instance)."""
    if not text:
        return None
    m = _PCI_ID.search(text)
    if not m:
        return None
    return (
        m.group(1).lower(),
        m.group(2).lower(),
        (m.group(3) or "").lower() or None,
        (m.group(4) or "").lower() or None,
        (m.group(5) or "").lstrip("\\"),
    )


_DATE = re.compile(r"^\s*(\d{1,4})[/.-](\d{1,2})[/.-](\d{1,4})")


def driver_date(text: Optional[str]) -> Optional[str]:
    """A driver date as dxdiag (`6/30/2025 5:00:00 PM`, `27/02/2020 21:00:00`: the locale's order) or
    WMI (`20200227000000.000000-000`, `2023-02-23T00:00:00Z`) writes it -> "YYYY-MM-DD", or "YYYY" where
    day and month could be either way round (both 12 or less in a day-month locale's text)."""
    if not text:
        return None
    t = text.strip()
    m = re.match(r"^(\d{4})(\d{2})(\d{2})\d{6}", t)  # CIM_DATETIME
    if m:
        return f"{m.group(1)}-{m.group(2)}-{m.group(3)}"
    m = _DATE.match(t)
    if not m:
        return None
    a, b, c = (int(x) for x in m.groups())
    if a > 31:  # ISO: year first
        return f"{a:04d}-{b:02d}-{c:02d}" if 1 <= b <= 12 and 1 <= c <= 31 else None
    if c < 1900:
        return None
    if a > 12 and 1 <= b <= 12:
        return f"{c:04d}-{b:02d}-{a:02d}"
    if b > 12 and 1 <= a <= 12:
        return f"{c:04d}-{a:02d}-{b:02d}"
    return f"{c:04d}" if 1 <= a <= 12 and 1 <= b <= 12 else None
