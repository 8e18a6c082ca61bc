"""What every nvidia-smi parser returns (NvGpu, SmiReport) and the small readers of nvidia-smi's values
they share: 'N/A' and its kin as None, versions, MiB, PCI ids, UUIDs, serials, MIG mode, names; the same
GPU seen by two outputs merged."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, Dict, List, Optional, Tuple

_NOT_VALUES = {
    "",
    "n/a",
    "[n/a]",
    "na",
    "none",
    "not supported",
    "[not supported]",
    "unknown error",
    "[unknown error]",
    "requested functionality has been deprecated",
    "[insufficient permissions]",
    "insufficient permissions",
    "redacted",
    "gpu requires reset",
    "[gpu requires reset]",
}


# -- the data every parser returns ---------------------------------------------------------------


@dataclass
class NvGpu:
    """One GPU as one nvidia-smi output shows it."""

    index: Optional[int] = None
    name: Optional[str] = None
    name_truncated: bool = False
    cut_at_word: bool = False  # the table cut the name at a space ("RTX 5070 ..."), not inside a word
    uuid: Optional[str] = None
    pci_bus_id: Optional[str] = None
    pci_device_id: Optional[str] = None
    pci_vendor_id: Optional[str] = None
    serial: Optional[str] = None
    memory_mib: Optional[int] = None
    compute_capability: Optional[str] = None
    architecture: Optional[str] = None
    mig_mode: Optional[str] = None
    mig_devices: int = 0
    driver_model: Optional[str] = None  # WDDM / TCC / MCDM on Windows, None on Linux
    mig: Tuple[Tuple[str, int, Optional[str]], ...] = ()  # (profile, device index, MIG- UUID), `nvidia-smi -L`


@dataclass
class SmiReport:
    driver_version: Optional[str] = None
    cuda_version: Optional[str] = None
    smi_version: Optional[str] = None  # the table header's "NVIDIA-SMI x.y" (differs from the driver in WSL2)
    gpus: List[NvGpu] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


# -- small helpers ---------------------------------------------------------------------------------


def _value(raw: Optional[str]) -> Optional[str]:
    """Trimmed text; nvidia-smi's placeholders and bracketed notes ("[Deprecated; ...]") dropped."""
    if raw is None:
        return None
    v = re.sub(r"\s*\[(?:deprecated|note)[^\]]*\]?\s*$", "", raw.strip(), flags=re.I).strip()
    if v.lower() in _NOT_VALUES:
        return None
    return v


def _version(raw: Optional[str]) -> Optional[str]:
    v = _value(raw)
    if v is None:
        return None
    m = re.match(r"^(\d+(?:\.\d+){0,3})\b", v)
    return m.group(1) if m else None


def _cuda_version(raw: Optional[str]) -> Optional[str]:
    v = _version(raw)
    if v is None:
        return None
    m = re.match(r"^(\d+)\.(\d+)", v)
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def _mib(raw: Optional[str]) -> Optional[int]:
    v = _value(raw)
    if v is None:
        return None
    m = re.match(r"^(\d+)\s*(MiB|MB)?\s*$", v, re.I)
    return int(m.group(1)) if m else None


def _pci_ids(raw: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """nvidia-smi's combined id "0x20B010DE" / "20B010DE" -> ("0x20b0", "0x10de")."""
    v = _value(raw)
    if v is None:
        return None, None
    m = re.fullmatch(r"(?:0x)?([0-9A-Fa-f]{4})([0-9A-Fa-f]{4})", v.strip())
    if not m:
        return None, None
    return "0x" + m.group(1).lower(), "0x" + m.group(2).lower()


def _uuid(raw: Optional[str]) -> Optional[str]:
    v = _value(raw)
    if v is None or not re.fullmatch(r"(GPU|MIG)-[0-9A-Fa-f-]{8,}", v):
        return None
    if set(v[4:].replace("-", "")) == {"0"}:
        return None  # redacted by whoever captured it, not an identity
    return v


def _serial(raw: Optional[str]) -> Optional[str]:
    v = _value(raw)
    if v is None or set(v) <= {"0"} or not re.fullmatch(r"[0-9A-Za-z-]{4,40}", v):
        return None
    return v


def _mig_mode(raw: Optional[str]) -> Optional[str]:
    v = _value(raw)
    if v is None:
        return None
    low = v.lower()
    if low in ("enabled", "on"):
        return "Enabled"
    if low in ("disabled", "off"):
        return "Disabled"
    return None


def _name(raw: Optional[str]) -> Tuple[Optional[str], bool]:
    v = _value(raw)
    if v is None:
        return None, False
    v = " ".join(v.split())
    if v.endswith("..."):
        v = v[:-3].rstrip()
        return (v or None), True
    return v, False


def _merge_gpu(a: NvGpu, b: NvGpu) -> NvGpu:
    """a's values win; b fills what a lacks (a truncated name yields to a full one)."""
    changes: Dict[str, Any] = {}
    for f in fields(NvGpu):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if f.name == "name":
            if vb and (va is None or (a.name_truncated and not b.name_truncated)):
                changes["name"] = vb
                changes["name_truncated"] = b.name_truncated
                changes["cut_at_word"] = b.cut_at_word
        elif f.name in ("name_truncated", "cut_at_word"):
            continue
        elif f.name in ("mig_devices", "mig"):
            if vb and not va:
                changes[f.name] = vb
        elif va is None and vb is not None:
            changes[f.name] = vb
    return replace(a, **changes) if changes else a


def _same(a: NvGpu, b: NvGpu) -> bool:
    if a.pci_bus_id and b.pci_bus_id:
        return a.pci_bus_id == b.pci_bus_id
    if a.uuid and b.uuid:
        return a.uuid.lower() == b.uuid.lower()
    return a.index is not None and a.index == b.index


def _dedupe(gpus: List[NvGpu]) -> List[NvGpu]:
    """A line doubled by a terminal or a paste must not become a second GPU."""
    out: List[NvGpu] = []
    for g in gpus:
        for i, kept in enumerate(out):
            if _same(kept, g):
                out[i] = _merge_gpu(kept, g)
                break
        else:
            out.append(g)
    return out
