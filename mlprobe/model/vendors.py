"""Vendor names from PCI ids and from the free text tools print. The vendors, their PCI ids and the
words that name them are rows of mlprobe/knowledge/registry.json (source: pci.ids)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Dict, Optional, Tuple

from .vocabulary import vocabulary


@lru_cache(maxsize=1)
def _pci_vendors() -> Dict[str, str]:
    return {pci: v.id for v in vocabulary().vendors for pci in v.pci}


@lru_cache(maxsize=1)
def _text_vendors() -> "Tuple[Tuple[re.Pattern[str], str], ...]":
    return tuple((v.text, v.id) for v in vocabulary().vendors if v.text is not None)


def vendor_from_pci(vendor_id: Optional[str]) -> Optional[str]:
    if not vendor_id:
        return None
    key = vendor_id.lower().replace("0x", "").strip().zfill(4)
    return _pci_vendors().get(key)


def vendor_from_text(text: Optional[str]) -> Optional[str]:
    if not text:
        return None
    for pattern, vendor in _text_vendors():
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
