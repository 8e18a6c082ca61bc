"""WMI's answers in the shapes users paste: Win32_Processor (the CPU and its architecture) and
Win32_VideoController (wmic /format:list, PowerShell's list and table views, ConvertTo-Json, CIM
XML), read as display adapters."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ParseError
from ..model.facts import CpuFacts
from ..model.vendors import vendor_from_text
from ._util import clean_text
from .windows_adapter import Adapter, _na, _pci_parts, driver_date


# -- Win32_Processor -----------------------------------------------------------------------------------------

# Win32_Processor.Architecture (Microsoft Learn, Win32_Processor class): 0 x86, 5 ARM, 9 x64, 12 ARM64
_WMI_ARCH = {"0": "i686", "5": "arm", "9": "x86_64", "12": "aarch64"}
_WMI_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd", "HygonGenuine": "hygon", "CentaurHauls": "centaur",
                "Qualcomm Technologies Inc": "qualcomm"}


def _wmi_int(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    text = str(value or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def cpu_from_win32_processor(records: List[Dict[str, Any]]) -> CpuFacts:
    """Win32_Processor records (one per socket) -> CpuFacts: the model and vendor, cores and threads
    summed over the sockets. WMI lists no SIMD flags, so `flags` stays empty (the plan may settle AVX
    from the CPU's family, knowledge/cpu_families.json)."""
    named = [r for r in records if _na(str(r.get("Name") or ""))]
    if not named:
        raise ParseError("no Win32_Processor record with a Name")
    first = named[0]
    model = " ".join(str(first["Name"]).split())
    maker = _na(str(first.get("Manufacturer") or "")) or None
    vendor = _WMI_VENDORS.get(maker or "") or vendor_from_text(model) or (maker.split()[0].lower() if maker else None)
    arch = _WMI_ARCH.get(str(first.get("Architecture") if first.get("Architecture") is not None else "").strip())
    if arch is None and vendor in ("intel", "amd"):
        arch = "x86_64" if str(first.get("AddressWidth") or "64").strip() == "64" else "i686"
    cores = [_wmi_int(r.get("NumberOfCores")) for r in named]
    threads = [_wmi_int(r.get("NumberOfLogicalProcessors")) for r in named]
    return CpuFacts(
        vendor=vendor, vendor_id=maker, model=model, arch=arch,
        cores=sum(c for c in cores if c) if all(cores) else None,
        threads=sum(t for t in threads if t) if all(threads) else None,
        source="Win32_Processor",
    )


def parse_win32_processor_json(text: str) -> CpuFacts:
    """PowerShell `Get-CimInstance Win32_Processor | ConvertTo-Json` (one object, or a list per socket)."""
    text = clean_text(text).lstrip("\ufeff")
    start = min([i for i in (text.find("["), text.find("{")) if i >= 0], default=-1)
    if start < 0:
        raise ParseError("no JSON object in the Win32_Processor capture")
    try:
        doc, _end = json.JSONDecoder().raw_decode(text[start:])
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"Win32_Processor JSON does not parse: {exc}") from None
    return cpu_from_win32_processor(_records_from_json(doc))


def parse_win32_processor_list(text: str) -> CpuFacts:
    """`wmic cpu get /format:list` (Key=Value) or PowerShell's `Format-List` (Key : Value); a record
    ends where a property name repeats (the next socket)."""
    records: List[Dict[str, Any]] = [{}]
    for line in clean_text(text.replace("\r\r\n", "\r\n")).split("\n"):
        m = _LIST_KV.match(line.strip())
        if not m:
            continue
        if m.group(1) in records[-1]:
            records.append({})
        records[-1][m.group(1)] = m.group(2).strip()
    return cpu_from_win32_processor([r for r in records if r])


# -- Win32_VideoController ---------------------------------------------------------------------------------


def _records_from_json(doc: Any) -> List[Dict[str, Any]]:
    items = doc if isinstance(doc, list) else [doc]
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        rec = dict(item)
        # Windows PowerShell 5.1 also serialises the CIM property bag; use it where the flat
        # properties are missing.
        props = item.get("CimInstanceProperties")
        if isinstance(props, list):
            for p in props:
                if isinstance(p, dict) and isinstance(p.get("Name"), str):
                    rec.setdefault(p["Name"], p.get("Value"))
        out.append(rec)
    return out


def parse_win32_json(text: str) -> List[Adapter]:
    """PowerShell `Get-CimInstance Win32_VideoController | ConvertTo-Json`: one object or a list."""
    text = clean_text(text).lstrip("\ufeff")
    start = min([i for i in (text.find("["), text.find("{")) if i >= 0], default=-1)
    if start < 0:
        raise ParseError("no JSON object in the Win32_VideoController capture")
    try:
        doc = json.loads(text[start:])
    except (ValueError, RecursionError):
        try:
            doc, _end = json.JSONDecoder().raw_decode(text[start:])
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"Win32_VideoController JSON does not parse: {exc}") from None
    records = _records_from_json(doc)
    if not any(("PNPDeviceID" in r or "Name" in r) for r in records):
        raise ParseError("no Win32_VideoController properties (Name, PNPDeviceID) in the JSON")
    return _wmi_adapters(records)


def _wmi_adapters(records: List[Dict[str, Any]]) -> List[Adapter]:
    with_pnp = any("PNPDeviceID" in r for r in records)
    adapters = []
    for r in records:
        a = _adapter_from_wmi(r)
        if with_pnp and "PNPDeviceID" not in r:
            a.pci = False  # a fragment of a record (the capture does carry PNPDeviceIDs)
        adapters.append(a)
    return _group_wmi(adapters)


def _group_wmi(adapters: List[Adapter]) -> List[Adapter]:
    """WMI has one record per adapter; a record repeated by a paste is one adapter."""
    out: List[Adapter] = []
    seen: set[Tuple[Any, ...]] = set()
    for a in adapters:
        ident = (a.pnp or a.name, a.pci)
        if ident in seen:
            continue
        seen.add(ident)
        out.append(a)
    return out


_LIST_KV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?:=|\s:)\s?(.*)$")


def parse_win32_list(text: str) -> List[Adapter]:
    """`wmic path win32_VideoController get /format:list` (Key=Value) or PowerShell's list view
    (Key : Value). A record ends at a run of blank lines longer than the runs between the lines of
    one record, or, where no such runs tell records apart, where a property name repeats: wmic's CR CR LF line ends, read as two line ends,
    put a blank line after every line, so a single blank line need not separate anything."""
    text = clean_text(text.replace("\r\r\n", "\r\n"))
    rows: List[Tuple[int, str, str]] = []  # (blank lines before it, key, value)
    blanks = 0
    for line in text.split("\n"):
        if not line.strip():
            blanks += 1
            continue
        m = _LIST_KV.match(line.strip())
        if not m:
            continue  # a value's continuation or a prompt line: neither ends a record
        rows.append((blanks, m.group(1), m.group(2).strip()))
        blanks = 0
    gaps = [b for b, _, _ in rows[1:]]
    inner = min(gaps) if gaps else 0
    split_on_gap = bool(gaps) and max(gaps) > inner
    records: List[Dict[str, Any]] = []
    current: Dict[str, Any] = {}
    last_key = None
    for before, key, value in rows:
        gap = split_on_gap and before > inner
        repeat = key == last_key and len(current) > 1 and value and str(current[key]).startswith(value)
        last_key = key
        if not gap and repeat:
            continue  # the line just read again (whole or cut short): a paste repeated it
        # Where blank-line runs delimit the records, they alone do: a property read twice inside
        # one record (a garbled paste) does not make a record of its own.
        if current and (gap or (key in current and not split_on_gap)):
            records.append(current)
            current = {}
        current[key] = value
    if current:
        records.append(current)
    records = [r for r in records if "PNPDeviceID" in r or "Name" in r or "Caption" in r]
    if not records:
        raise ParseError("no Win32_VideoController Key=Value / Key : Value records")
    return _wmi_adapters(records)


def _adapter_from_wmi(r: Dict[str, Any]) -> Adapter:
    pnp = str(r.get("PNPDeviceID") or "")
    parts = _pci_parts(pnp.replace("&amp;", "&"))
    ram = r.get("AdapterRAM")
    try:
        ram_int: Optional[int] = int(str(ram).strip()) if ram not in (None, "") else None
    except ValueError:
        ram_int = None
    name = _na(str(r.get("Name") or r.get("Caption") or r.get("VideoProcessor") or "")) or None
    ad = Adapter(
        name=" ".join(name.split()) if name else None,
        manufacturer=_na(str(r.get("AdapterCompatibility") or "")),
        pci_vendor_id=("0x" + parts[0]) if parts else None,
        pci_device_id=("0x" + parts[1]) if parts else None,
        subsys=parts[2] if parts else None,
        revision=("0x" + parts[3]) if parts and parts[3] else None,
        pci=(parts is not None) if "PNPDeviceID" in r else None,
        driver_version_raw=_na(str(r.get("DriverVersion") or "")),
        driver_date=driver_date(_na(str(r.get("DriverDate") or ""))),
        adapter_ram=ram_int if ram_int is not None and ram_int > 0 else None,
        pnp=pnp or None,
    )
    if ad.name and re.search(r"basic display adapter", ad.name, re.I):
        ad.vendor_driver = False
    return ad
