"""Intel GPUs by PCI device id and by marketing name: lookups in mlprobe/knowledge/intel_gpus.json that
the Intel, PCI, OpenCL and collect_env probes share (a probe never imports another probe)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Dict, List, Optional, Union

from .. import knowledge as kb
from ..vendors import hex_id


@lru_cache(maxsize=1)
def _table() -> Dict[str, Dict[str, Any]]:
    """The rows by PCI id, each with the product's name from pci.ids where that names one (Mesa
    names Battlemage, Panther Lake and Ponte Vecchio parts only 'Intel(R) Graphics' or by family);
    `name_source` then says so, the row's `source` stays the one for its other fields."""
    table = {row["pci_device_id"]: dict(row) for row in kb.rows("intel_gpus") if "pci_device_id" in row}
    for product in kb.rows("intel_gpus", "product_names"):
        row = table.get(str(product.get("pci_device_id")))
        if row is not None and product.get("name"):
            row.update(name=product["name"], name_source=product.get("source"))
    return table


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


@lru_cache(maxsize=1)
def _by_name() -> Dict[str, Dict[str, Any]]:
    """Marketing name (lowercase) -> what every row of that name agrees on (generation, discrete,
    xpu_supported). A name several generations share ("Intel(R) Graphics", "Intel(R) HD Graphics")
    agrees on nothing and is left out: a name alone then says no more than it says."""
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for row in _table().values():
        if row.get("name"):
            groups.setdefault(str(row["name"]).lower(), []).append(row)
    out: Dict[str, Dict[str, Any]] = {}
    for name, rows in groups.items():
        agreed = {k: rows[0].get(k) for k in ("generation", "discrete", "xpu_supported")
                  if all(r.get(k) == rows[0].get(k) for r in rows)}
        if "generation" in agreed:
            out[name] = agreed
    return out


def intel_gpu_info_by_name(name: Optional[str]) -> Optional[Dict[str, Any]]:
    """The table's facts for a marketing name that only one generation carries, else None."""
    if not name:
        return None
    found = _by_name().get(name.strip().lower())
    return dict(found) if found is not None else None
