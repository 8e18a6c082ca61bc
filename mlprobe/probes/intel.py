"""Intel GPUs on Linux from the DRM cards in sysfs (`drm-drivers.txt`), plus the Intel GPU table.

`drm-drivers.txt` has one line per DRM card: `card0 0000:00:02.0 0x8086 0x3e92 i915` (card, PCI bus
id, vendor id, device id, bound driver or `-`). This probe adds what only Intel knowledge gives: the
marketing name, the generation, integrated or discrete, and whether PyTorch's XPU backend covers the
GPU (then apis=("xpu",), but only while the i915 or xe kernel driver is bound: without it nothing
can reach the GPU). The pci and opencl probes see the same device; scan.py merges them by bus id or
PCI device id.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Dict, List, NamedTuple, Optional, Union

from ..model import knowledge as kb
from ..errors import ParseError
from ..model.facts import Contribution, GpuFacts
from ..scan.capture import Host
from ..model.vendors import hex_id, normalise_bus_id
from ._util import single_capture

INTEL_VENDOR_ID = "0x8086"
XPU_DRIVERS = ("i915", "xe")


class DrmCard(NamedTuple):
    card: str
    pci_bus_id: Optional[str]
    vendor_id: str  # "0x8086"
    device_id: str  # "0x3e92"
    driver: Optional[str]  # None when no driver is bound


@lru_cache(maxsize=1)
def _table() -> Dict[str, Dict[str, Any]]:
    return {row["pci_device_id"]: row for row in kb.rows("intel_gpus") if "pci_device_id" in row}


def intel_gpu_info(pci_device_id: Union[str, int, None]) -> Optional[Dict[str, Any]]:
    """'0x3e92' / '3E92' / 0x3e92 -> {name, generation, discrete, xpu_supported, platform, source, ...}
    from mlprobe/knowledge/intel_gpus.json, or None for an id the table does not know."""
    if isinstance(pci_device_id, bool) or pci_device_id is None:
        return None
    if isinstance(pci_device_id, int):
        if not 0 <= pci_device_id <= 0xFFFF:
            return None
        key: Optional[str] = f"0x{pci_device_id:04x}"
    else:
        key = hex_id(str(pci_device_id))
    if key is None:
        return None
    row = _table().get(key)
    return dict(row) if row is not None else None


_LINE = re.compile(
    r"^\s*(card\d+)\s+(\S+)\s+(?:0x)?([0-9a-fA-F]{4})\s+(?:0x)?([0-9a-fA-F]{4})(?:\s+(\S+))?\s*$")


def parse_drm_drivers(text: str) -> List[DrmCard]:
    """`drm-drivers.txt` -> one DrmCard per well-formed line (other lines are skipped).

    Empty text is no card; text with no card line at all is not this format (ParseError)."""
    cards: List[DrmCard] = []
    seen = set()
    lines = [ln for ln in text.replace("\r", "\n").split("\n") if ln.strip()]
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        card, bus, vendor, device, driver = m.groups()
        if card in seen:
            continue  # a repeated line is the same card
        seen.add(card)
        cards.append(DrmCard(
            card=card, pci_bus_id=normalise_bus_id(bus), vendor_id=f"0x{vendor.lower()}",
            device_id=f"0x{device.lower()}", driver=None if driver in (None, "-") else driver))
    if lines and not cards:
        raise ParseError("drm-drivers.txt has no `cardN BUS VENDOR DEVICE DRIVER` line")
    return cards


def gpu_from_card(card: DrmCard) -> GpuFacts:
    info = intel_gpu_info(card.device_id)
    notes = []
    if info is None:
        notes.append(f"Intel GPU {card.device_id} is not in mlprobe's Intel GPU table")
    if card.driver is None:
        notes.append("no kernel driver is bound to this GPU (i915 or xe is needed)")
    elif card.driver not in XPU_DRIVERS:
        notes.append(f"bound to the {card.driver} driver, not i915 or xe")
    xpu = bool(info and info.get("xpu_supported")) and card.driver in XPU_DRIVERS
    return GpuFacts(
        vendor="intel", name=info.get("name") if info else None,
        integrated=(not info["discrete"]) if info and isinstance(info.get("discrete"), bool) else None,
        apis=("xpu",) if xpu else (), architecture=info.get("generation") if info else None,
        pci_bus_id=card.pci_bus_id, pci_vendor_id=card.vendor_id, pci_device_id=card.device_id,
        sources=("intel",), notes=tuple(notes),
    )


def probe(host: Host) -> Contribution:
    out = Contribution()
    cards = single_capture(host, "drm-drivers.txt", parse_drm_drivers, out,
                           "no DRM cards (not Linux, or no GPU driver loaded)")
    if cards is None:
        return out
    intel = [c for c in cards if c.vendor_id == INTEL_VENDOR_ID]
    if not intel:
        return out  # read fine; this machine's GPUs are other vendors'
    out.gpus = [gpu_from_card(c) for c in intel]
    return out


__all__ = ["DrmCard", "intel_gpu_info", "parse_drm_drivers", "gpu_from_card", "probe"]
