"""lscpu's output, read by the cpu probe and inside a collect_env paste (which embeds it).

On Arm, lscpu prints the core's name from util-linux's own MIDR table (`Vendor ID: ARM`, `Model name:
Neoverse-V2`), and its spelling of a part changes between util-linux releases (HiSilicon 0xd01 was
`tsv110`, then `Kunpeng-920`, then `TaiShan-v110`); an lscpu older than its table prints the implementer
as a number (`Vendor ID: 0x48`). Both are mapped back to the MIDR ids of knowledge/arm_cores.json, so the
CPU's vendor, core kinds and model read the same as from /proc/cpuinfo. The newer tree layout indents
the lines under `Vendor ID`, and a long `Flags:` line may be wrapped onto indented lines of its own."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ..errors import ParseError
from ..model import knowledge as kb
from ..model.facts import CoreType, CpuFacts
from ._util import key_values
from ..model.hw.cpu import X86_VENDORS, x86_64_level

MODEL_NAMES = "Model names"  # every `Model name:` line, one a line (big.LITTLE lists several)


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
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("Flags:"):
            # a terminal-width paste wraps the flags onto indented lines without a key
            extra = []
            for nxt in lines[i + 1:]:
                if not nxt[:1].isspace() or ":" in nxt or not nxt.strip():
                    break
                extra.append(nxt.strip())
            if extra:
                out["Flags"] = " ".join([out.get("Flags", "")] + extra).strip()
            break
    names = [m.group(1).strip() for m in re.finditer(r"^\s*Model name:\s*(\S.*?)\s*$", text, re.M)]
    if len(names) > 1:
        out[MODEL_NAMES] = "\n".join(dict.fromkeys(names))
    return out


def _arm_implementer(vendor_id: Optional[str]) -> Optional[Dict[str, str]]:
    """The arm_cores.json implementer row lscpu's `Vendor ID` names: by util-linux's name (`ARM`,
    `HiSilicon`, `FUJITSU`) or, from an lscpu that had no name for it, by number (`0x48`)."""
    if not vendor_id:
        return None
    v = vendor_id.strip()
    for row in kb.rows("arm_cores", "implementers"):
        if v.lower() == str(row.get("name", "")).lower():
            return {k: str(x) for k, x in row.items()}
        if v.lower().startswith("0x") and _int(v) == int(str(row["implementer"]), 16):
            return {k: str(x) for k, x in row.items()}
    return None


def arm_part_of_name(implementer: str, name: str) -> Optional[Tuple[str, str]]:
    """(part id, the table's name) of a core name lscpu printed for this implementer, by the table's
    name or by an older util-linux spelling (arm_cores.json `lscpu_names`)."""
    low = name.strip().lower()
    for row in kb.rows("arm_cores", "parts"):
        if row.get("implementer") == implementer and str(row.get("name", "")).lower() == low:
            return str(row["part"]), str(row["name"])
    for row in kb.rows("arm_cores", "lscpu_names"):
        if row.get("implementer") == implementer and low in {str(n).lower() for n in row.get("names") or ()}:
            part = str(row["part"])
            canon = next((str(r["name"]) for r in kb.rows("arm_cores", "parts")
                          if r.get("implementer") == implementer and r.get("part") == part), name)
            return part, canon
    return None


def cpu_from_lscpu(fields: Dict[str, str]) -> CpuFacts:
    from .cpu_ports import arm_isa_summary

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
    model = fields.get("Model name")
    if model in ("-", ""):
        model = None
    evidence = "lscpu.txt" if arch else None
    core_types: Tuple[CoreType, ...] = ()
    isa: Optional[str] = None
    impl = _arm_implementer(vendor_id) if vendor is None or vendor not in X86_VENDORS.values() else None
    if impl is not None:
        vendor = impl["vendor"]
        names = (fields.get(MODEL_NAMES) or model or "").split("\n")
        kinds: List[CoreType] = []
        for name in (n for n in names if n and n != "-"):
            hit = arm_part_of_name(impl["implementer"], name)
            kinds.append(CoreType(name=hit[1] if hit else None, count=threads or 0 if len(names) == 1 else 0,
                                  implementer=impl["implementer"], part=hit[0] if hit else None))
        core_types = tuple(kinds)
        named = [k.name for k in kinds if k.name]
        if named:
            model = " + ".join(dict.fromkeys(named))
        if arch is None and "64-bit" in fields.get("CPU op-mode(s)", ""):
            # an Arm implementer's cores with a 64-bit op-mode: AArch64 (lscpu's own `Architecture:` missing)
            arch = "aarch64"
            evidence = (f"lscpu.txt: CPU op-mode(s) {fields['CPU op-mode(s)']} with {impl['name']} cores "
                        "(Vendor ID), an Arm CPU")
        if arch in ("aarch64", "arm64"):
            isa = arm_isa_summary(flags)
    return CpuFacts(
        vendor=vendor, vendor_id=vendor_id, model=model, arch=arch, cores=cores,
        threads=threads, flags=flags,
        x86_64_level=x86_64_level(flags) if arch == "x86_64" and flags else None, source="lscpu.txt",
        core_types=core_types, isa_summary=isa, arch_evidence=evidence,
    )
