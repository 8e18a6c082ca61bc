"""The CPU microarchitecture as archspec names it (and so conda's `__archspec` build string), from a
scan's facts rather than from this machine: archspec's own targets and compatibility checks, fed
with the captured vendor, flags and part instead of its live /proc/cpuinfo read.

archspec's `host()` reads the running machine; its checks take a partial Microarchitecture, which is
what a capture gives. The choice below is `host()`'s: among the compatible targets, the newest
descendant of the best generic level (x86_64_v3, …), else that level itself."""

from __future__ import annotations

import re
from typing import Any, List, Optional

from ..model.facts import Facts

_FAMILY = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
           "ppc64le": "ppc64le", "ppc64": "ppc64", "riscv64": "riscv64"}


def _apple_name(model: str, targets: Any) -> Optional[str]:
    m = re.search(r"Apple\s+(M\d+)", model or "", re.I)
    name = m.group(1).lower() if m else None
    return name if name and name in targets else None


def microarchitecture(facts: Facts) -> Optional[str]:
    """archspec's name for the captured CPU (sapphirerapids, zen4, neoverse_v2, m1, power9, …), the
    generic family where nothing more is known, None without archspec or for an architecture it
    does not know."""
    try:
        from archspec.cpu import TARGETS
        from archspec.cpu import detect
    except ImportError:  # archspec is a dependency; a broken install costs this fact only
        return None
    family = _FAMILY.get((facts.cpu.arch or facts.python.machine or "").lower())
    if family is None or family not in TARGETS:
        return None
    if family == "aarch64" and facts.os.system == "Darwin":
        return _apple_name(facts.cpu.model or "", TARGETS) or family
    flags = set(facts.cpu.flags)
    if family == "x86_64":
        info = detect.partial_uarch(vendor=facts.cpu.vendor_id or "generic", features=flags)
    elif family == "aarch64":
        vendor = "generic"
        canon = getattr(detect, "_canonicalize_aarch64_vendor", None)
        if callable(canon) and facts.cpu.vendor_id:
            vendor = str(canon({"CPU implementer": facts.cpu.vendor_id}))
        part = next((c.part for c in facts.cpu.core_types if c.part), "") or ""
        info = detect.partial_uarch(vendor=vendor, features=flags, cpu_part=part)
    elif family in ("ppc64le", "ppc64"):
        m = re.search(r"POWER(\d+)", facts.cpu.model or "", re.I)
        info = detect.partial_uarch(generation=int(m.group(1)) if m else 0)
    else:
        return family
    tester = detect.COMPATIBILITY_CHECKS.get(family)
    if tester is None:
        return family
    try:
        candidates: List[Any] = [t for t in TARGETS.values() if _compatible(tester, info, t, family)]
    except Exception:  # archspec's checks read more than a capture has: the family is still right
        return family
    if not candidates:
        return family

    def depth(t: Any) -> Any:
        return len(t.ancestors), len(t.features)

    generic = [c for c in candidates if c.vendor == "generic"]
    best_generic = max(generic, key=depth) if generic else TARGETS[family]
    if info.cpu_part and any(c.cpu_part == info.cpu_part for c in candidates):
        candidates = [c for c in candidates if c.cpu_part == info.cpu_part]
    better = [c for c in candidates if c > best_generic]
    return str((max(better, key=depth) if better else best_generic).name)


def _compatible(tester: Any, info: Any, target: Any, family: str) -> bool:
    # archspec's power check roots the target at this machine's architecture; root it at the capture's
    if family in ("ppc64le", "ppc64"):
        from archspec.cpu import TARGETS

        root = TARGETS[family]
        return bool((target == root or root in target.ancestors) and target.generation <= info.generation)
    return bool(tester(info, target))
