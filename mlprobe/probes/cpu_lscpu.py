"""lscpu's output, read by the cpu probe and inside a collect_env paste (which embeds it)."""

from __future__ import annotations

from typing import Dict, Optional

from ..errors import ParseError
from ..model.facts import CpuFacts
from ._util import key_values
from ..model.hw.cpu import X86_VENDORS, x86_64_level


def _int(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    value = value.strip()
    try:
        return int(value, 0) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return None


def parse_lscpu(text: str) -> Dict[str, str]:
    out = key_values(text)
    if "Architecture" not in out and "CPU(s)" not in out:
        raise ParseError("lscpu output has neither `Architecture:` nor `CPU(s):`")
    return out


def cpu_from_lscpu(fields: Dict[str, str]) -> CpuFacts:
    arch = fields.get("Architecture")
    vendor_id = fields.get("Vendor ID")
    vendor = X86_VENDORS.get(vendor_id or "")
    if vendor is None and vendor_id:
        vendor = vendor_id.split()[0].lower()
    flags = tuple(sorted({f.lower() for f in fields.get("Flags", "").split()}))
    threads = _int(fields.get("CPU(s)"))
    per_core = _int(fields.get("Thread(s) per core"))
    per_socket = _int(fields.get("Core(s) per socket")) or _int(fields.get("Core(s) per cluster"))
    sockets = _int(fields.get("Socket(s)")) or _int(fields.get("Cluster(s)")) or 1
    cores = per_socket * sockets if per_socket else (threads // per_core if threads and per_core else None)
    return CpuFacts(
        vendor=vendor, vendor_id=vendor_id, model=fields.get("Model name"), arch=arch, cores=cores,
        threads=threads, flags=flags,
        x86_64_level=x86_64_level(flags) if arch == "x86_64" and flags else None, source="lscpu.txt",
        arch_evidence="lscpu.txt" if arch else None,
    )
