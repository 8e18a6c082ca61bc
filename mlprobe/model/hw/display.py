"""Display adapters that are not GPUs, by name (knowledge/pci_display.json `virtual_display_names`):
software, remote-desktop, streaming, virtual-monitor and hypervisor adapters that Windows lists beside
the real cards, some copying a real card's PCI ids. Loaded once; the Windows probe asks this."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Dict, List, Optional

from .. import knowledge as kb


def virtual_display_name_rows() -> List[Dict[str, Any]]:
    return [r for r in kb.rows("pci_display", "virtual_display_names") if isinstance(r.get("pattern"), str)]


@lru_cache(maxsize=1)
def not_gpu_name_pattern() -> "re.Pattern[str]":
    """One case-insensitive pattern of every row (a row whose pattern does not compile is left out)."""
    parts = []
    for r in virtual_display_name_rows():
        try:
            re.compile(r["pattern"])
        except re.error:
            continue
        parts.append(f"(?:{r['pattern']})")
    return re.compile("|".join(parts) if parts else r"(?!)", re.I)


def not_gpu_kind(name: Optional[str]) -> Optional[str]:
    """The kind of the first row whose pattern finds `name` ('streaming', 'remote-desktop', ...), else None."""
    if not name:
        return None
    for r in virtual_display_name_rows():
        try:
            if re.search(r["pattern"], name, re.I):
                return str(r.get("kind") or "virtual")
        except re.error:
            continue
    return None


def is_not_gpu_name(name: Optional[str]) -> bool:
    return bool(name) and bool(not_gpu_name_pattern().search(name or ""))


__all__ = ["is_not_gpu_name", "not_gpu_kind", "not_gpu_name_pattern", "virtual_display_name_rows"]
