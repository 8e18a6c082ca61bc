"""NVIDIA GPU knowledge, loaded once from knowledge/nvidia_gpus.json (its one home): a product name to
its compute capability and whether it is integrated, a compute capability to its architecture and
back, a driver to the newest CUDA it supports. The nvidia, opencl, windows and collect_env probes all
ask these."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional

from .. import knowledge as kb


def knowledge() -> Dict[str, Any]:
    """mlprobe/knowledge/nvidia_gpus.json (the one home of NVIDIA and driver -> CUDA knowledge)."""
    return kb.table("nvidia_gpus")


def lookup_name(name: Optional[str]) -> Optional[Dict[str, Any]]:
    """The first row of the name table matching an NVIDIA product name."""
    return kb.nvidia_name_row(kb.rows("nvidia_gpus", "compute_capability_by_name"), name)


def compute_capability_for(name: Optional[str]) -> Optional[str]:
    row = lookup_name(name)
    return str(row["compute_capability"]) if row else None


def compute_capability_for_truncated(prefix: Optional[str]) -> Optional[str]:
    """The compute capability of a name nvidia-smi's table cut short ("NVIDIA GeForce RTX 5070 ..."),
    only where the matching row's pattern ends before the cut, at a space: the model number is
    whole, so the missing tail ("Ti", "Laptop GPU") can only be a variant of the same chip family."""
    if not prefix:
        return None
    clean = " ".join(prefix.replace("_", " ").split())
    row = kb.nvidia_name_row(kb.rows("nvidia_gpus", "compute_capability_by_name"), clean)
    if row is None:
        return None
    m = re.search(str(row["pattern"]), clean, re.I)
    if m is None or (m.end() < len(clean) and not clean[m.end()].isspace()):
        return None
    return str(row["compute_capability"])


def compute_capability_for_name_prefix(prefix: Optional[str]) -> Optional[str]:
    """A name nvidia-smi's table cut inside a word ("NVIDIA RTX PRO 6000 Blac", from "... Blackwell"),
    where no pattern can match: the rows whose listed product names (`examples`) begin with the cut
    name. Only where a whole model number precedes the cut ("6000 Blac", not "RTX 507") and every such
    row gives the same compute capability."""
    if not prefix:
        return None
    clean = " ".join(prefix.replace("_", " ").split())
    if not re.search(r"\b\d{3,}\s", clean):
        return None
    want = re.sub(r"^nvidia\s+", "", clean, flags=re.I).lower()
    found: set[str] = set()
    for row in kb.rows("nvidia_gpus", "compute_capability_by_name"):
        for example in row.get("examples") or ():
            name = re.sub(r"^nvidia\s+", "", " ".join(str(example).split()), flags=re.I).lower()
            if name.startswith(want):
                found.add(str(row["compute_capability"]))
    return found.pop() if len(found) == 1 else None


def integrated_for(name: Optional[str]) -> Optional[bool]:
    """Tegra/Jetson/GB10 share system memory; every other NVIDIA GPU has its own."""
    row = lookup_name(name)
    if row is not None:
        return bool(row.get("integrated", False))
    if not name:
        return None
    return bool(re.search(r"\b(jetson|tegra)\b", name, re.I))


def architecture_for(cc: Optional[str]) -> Optional[str]:
    if not cc:
        return None
    for row in kb.rows("nvidia_gpus", "architecture_by_compute_capability"):
        if row.get("compute_capability") == cc:
            return str(row["architecture"])
    return None


def compute_capability_for_architecture(arch: Optional[str]) -> Optional[str]:
    """The compute capability an architecture name implies, where it implies one value (`nvidia-smi -q`
    prints "Product Architecture : Hopper"): Turing 7.5, Ada Lovelace 8.9, Hopper 9.0. Ampere, Pascal,
    Blackwell and the others span several values, so they give None."""
    if not arch:
        return None
    want = " ".join(arch.split()).lower()
    ccs = {str(r.get("compute_capability")) for r in knowledge().get("architecture_by_compute_capability", [])
           if isinstance(r, dict) and str(r.get("architecture", "")).lower() == want}
    return ccs.pop() if len(ccs) == 1 else None


def cuda_for_driver(driver: Optional[str], system: Optional[str] = None) -> Optional[str]:
    """The CUDA version a driver supports (what nvidia-smi's "CUDA Version" says): the newest
    toolkit whose bundled driver is not newer than `driver`. None below the table, and None where
    the answer is unknowable (a Windows driver newer than the last toolkit that published one)."""
    column = "windows" if system == "Windows" else "linux"
    return kb.newest_cuda(kb.rows("nvidia_gpus", "cuda_toolkit_min_driver"), driver, column)
