"""AMD GPU knowledge, loaded once: a PCI device id to its native gfx target and whether it is an APU
(knowledge/amd_gfx.json), a gfx target to its architecture (amd_arch.json), and the two ways ROCm
writes a target (HSA_OVERRIDE_GFX_VERSION's `10.3.0`, KFD's `100301`) and a PCI location. The rocm,
pci and windows probes all ask these."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Dict, Optional, Tuple

from .. import knowledge as kb

GFX_NAME = re.compile(r"^gfx[0-9a-f]{3,5}$")


def gfx_from_version(value: Optional[str]) -> Optional[str]:
    """'10.3.0' (HSA_OVERRIDE_GFX_VERSION) or '100301' (KFD gfx_target_version) -> 'gfx1031'.

    Minor and stepping are printed in hex, as rocm_agent_enumerator does: 9.0.10 / 90010 -> gfx90a.
    Anything else (empty, zero, malformed) -> None.
    """
    if value is None:
        return None
    s = value.strip().lower()
    if GFX_NAME.match(s):
        return s
    m = re.fullmatch(r"(\d{1,2})\.(\d{1,3})\.(\d{1,3})", s)
    if m:
        major, minor, stepping = (int(g) for g in m.groups())
    elif re.fullmatch(r"\d{5,6}", s):
        n = int(s)
        major, minor, stepping = n // 10000, (n // 100) % 100, n % 100
    else:
        return None
    if not 1 <= major <= 63 or minor > 255 or stepping > 255:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


@lru_cache(maxsize=1)
def _gfx_rows() -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for r in kb.rows("amd_gfx"):
        if isinstance(r.get("pci_device_id"), str):
            out.setdefault(r["pci_device_id"].lower(), r)
    return out


@lru_cache(maxsize=1)
def _arch_rows() -> Dict[str, str]:
    return {r["gfx_target"]: r["architecture"] for r in kb.rows("amd_arch")
            if isinstance(r.get("gfx_target"), str) and isinstance(r.get("architecture"), str)}


def amd_device(device_id: Optional[str], revision: Optional[str] = None) -> Tuple[Optional[str], Optional[bool]]:
    """PCI device id ('0x73df') [+ PCI revision ('0xc1', 'c1')] -> (native gfx target, integrated) from
    amd_gfx.json; the rocm, pci and windows probes all ask this."""
    if not device_id:
        return None, None
    row = _gfx_rows().get(device_id.lower())
    if row is None:
        return None, None
    gfx = row.get("gfx_target")
    exceptions = row.get("revision_exceptions")
    if revision and isinstance(exceptions, dict):
        gfx = exceptions.get("0x" + revision.lower().replace("0x", "").zfill(2), gfx)
    integrated = row.get("integrated", row.get("apu"))
    return (gfx if isinstance(gfx, str) else None), (integrated if isinstance(integrated, bool) else None)


def architecture_of(gfx: Optional[str]) -> Optional[str]:
    """'gfx1031' -> 'RDNA2' (knowledge/amd_arch.json); unknown targets -> None."""
    return _arch_rows().get(gfx) if gfx else None


def bus_id_from_bdfid(bdfid: Optional[int], domain: int = 0) -> Optional[str]:
    """rocminfo's BDFID / KFD's location_id (bus << 8 | device << 3 | function) -> '0000:03:00.0'.
    0 means "not reported" for a GPU (a GPU is never the host bridge at 00:00.0)."""
    if not bdfid or bdfid < 0 or bdfid > 0xFFFF or domain < 0 or domain > 0xFFFF:
        return None
    return f"{domain:04x}:{(bdfid >> 8) & 0xFF:02x}:{(bdfid >> 3) & 0x1F:02x}.{bdfid & 0x7}"
