"""Vendor names from PCI ids and from the free text tools print.

source: PCI-SIG vendor ids as listed in pci.ids (github.com/pciutils/pciids, pci.ids):
10de NVIDIA, 1002 ATI/AMD, 1022 AMD, 8086 Intel, 106b Apple, 13b5 ARM, 5143 Qualcomm,
1414 Microsoft, 15ad VMware, 1af4 Red Hat (virtio), 1234 QEMU, 1a03 ASPEED, 102b Matrox,
1ed5 Moore Threads, 1e3e Iluvatar, 1d17 Zhaoxin; USB ids from usb.ids (03e7 Intel Movidius,
1a6e Global Unichip (Coral), 18d1 Google).
"""

from __future__ import annotations

import re
from typing import Optional

PCI_VENDORS = {
    "10de": "nvidia", "1002": "amd", "1022": "amd", "8086": "intel", "106b": "apple", "13b5": "arm",
    "5143": "qualcomm", "1414": "microsoft", "15ad": "vmware", "1af4": "virtio", "1234": "qemu",
    "1a03": "aspeed", "102b": "matrox", "1ed5": "moorethreads", "1d17": "zhaoxin",
}

_TEXT_VENDORS = (
    (re.compile(r"nvidia|geforce|quadro|tesla|\brtx\b|\bgtx\b", re.I), "nvidia"),
    (re.compile(r"advanced micro devices|\bamd\b|\bati\b|radeon|firepro|instinct|gfx\d", re.I), "amd"),
    (re.compile(r"intel|\barc\b|iris|uhd graphics|hd graphics", re.I), "intel"),
    (re.compile(r"apple", re.I), "apple"),
    (re.compile(r"\barm\b|mali", re.I), "arm"),
    (re.compile(r"qualcomm|adreno", re.I), "qualcomm"),
    (re.compile(r"microsoft", re.I), "microsoft"),
    (re.compile(r"vmware", re.I), "vmware"),
    (re.compile(r"aspeed", re.I), "aspeed"),
    (re.compile(r"matrox", re.I), "matrox"),
)


def vendor_from_pci(vendor_id: Optional[str]) -> Optional[str]:
    if not vendor_id:
        return None
    key = vendor_id.lower().replace("0x", "").strip().zfill(4)
    return PCI_VENDORS.get(key)


def vendor_from_text(text: Optional[str]) -> Optional[str]:
    if not text:
        return None
    for pattern, vendor in _TEXT_VENDORS:
        if pattern.search(text):
            return vendor
    return None


def hex_id(value: Optional[str]) -> Optional[str]:
    """'10DE', '0x10de', '4318' (decimal from some tools is NOT accepted here) -> '0x10de'."""
    if not value:
        return None
    v = value.strip().lower()
    v = v[2:] if v.startswith("0x") else v
    if not re.fullmatch(r"[0-9a-f]{1,4}", v):
        return None
    return "0x" + v.zfill(4)


def normalise_bus_id(bus: Optional[str]) -> Optional[str]:
    """'00000000:01:00.0' / '0000:01:00.0' / '01:00.0' -> '0000:01:00.0'."""
    if not bus:
        return None
    m = re.search(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", bus)
    if not m:
        return None
    domain = (m.group(1) or "0").lower()[-4:].zfill(4)
    return f"{domain}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"
