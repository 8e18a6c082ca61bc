"""USB ML accelerators (Intel Movidius Neural Compute Sticks, Google Coral USB) from `lsusb`.

`lsusb` lines look like `Bus 001 Device 007: ID 03e7:2485 Intel Movidius MyriadX`; `lsusb -v` repeats
the same line before each device's descriptors, so both are read. Devices are matched on their ids
(mlprobe/knowledge/usb_accelerators.json), never on the description, which older usb.ids leave empty.
These are accelerators, not GPUs: they go to `usb_accelerators`, never to `gpus`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from ..model import knowledge as kb
from ..errors import ParseError
from ..model.facts import Contribution, UsbAccelerator
from ..scan.capture import Host
from ._util import ANSI, single_capture

_LINE = re.compile(r"Bus\s+(\d{1,3})\s+Device\s+(\d{1,3}):\s+ID\s+([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\b[ \t]*([^\n]*)")


class UsbDevice(NamedTuple):
    bus: int
    device: int
    vendor_id: str  # "03e7"
    product_id: str  # "2485"
    description: Optional[str]  # what usb.ids names it, if anything


@lru_cache(maxsize=1)
def _table() -> Dict[Tuple[str, str], Dict[str, Any]]:
    return {(r["vendor_id"], r["product_id"]): r for r in kb.rows("usb_accelerators")
            if "vendor_id" in r and "product_id" in r}


def parse_lsusb(text: str) -> List[UsbDevice]:
    """`lsusb` (or `lsusb -v`) -> one UsbDevice per `Bus NNN Device NNN: ID vvvv:pppp` line.

    The same bus/device pair twice is one device. Empty output is no device; non-empty output with
    no such line at all is not lsusb output (ParseError)."""
    text = ANSI.sub("", text)
    out: List[UsbDevice] = []
    seen = set()
    for m in _LINE.finditer(text):
        bus, dev = int(m.group(1)), int(m.group(2))
        if (bus, dev) in seen:
            continue
        seen.add((bus, dev))
        desc = m.group(5).strip() or None
        out.append(UsbDevice(bus, dev, m.group(3).lower(), m.group(4).lower(), desc))
    if not out and text.strip():
        raise ParseError("lsusb output has no `Bus NNN Device NNN: ID vvvv:pppp` line")
    return out


def accelerator(dev: UsbDevice) -> Optional[UsbAccelerator]:
    row = _table().get((dev.vendor_id, dev.product_id))
    if row is None:
        return None
    return UsbAccelerator(vendor_id=dev.vendor_id, product_id=dev.product_id, name=row.get("name"),
                          kind=row.get("kind"))


def accelerators(devices: List[UsbDevice]) -> List[UsbAccelerator]:
    return [a for a in (accelerator(d) for d in devices) if a is not None]


def probe(host: Host) -> Contribution:
    out = Contribution()
    devices = single_capture(host, "usb-devices.txt", parse_lsusb, out, "lsusb not available")
    if devices is None:
        return out
    out.usb_accelerators = accelerators(devices)
    return out


__all__ = ["UsbDevice", "parse_lsusb", "accelerator", "accelerators", "probe"]
