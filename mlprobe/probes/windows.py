"""Windows display adapters: `dxdiag /t`, Win32_VideoController (PowerShell JSON, or the
`wmic ... /format:list` / PowerShell list view), and WSL2's GPU paravirtualisation (/dev/dxg).

What counts as a GPU: a PCI adapter (Device Key / PNPDeviceID `PCI\\VEN_...`) from a vendor that
makes GPUs. Software and virtual adapters (Microsoft Basic Render Driver, Remote Display Adapter,
Hyper-V video, virtual display drivers such as SuperDisplay) are not. dxdiag lists one Display
Device per monitor output, so one GPU driving two monitors appears twice: entries are grouped by
(PCI vendor, device, subsystem, revision, name, driver) and the number of physical cards of a group
is the number of distinct PCI instances dxdiag's System Devices section lists for it (at least one).

DirectML (`apis` "directml") - the rule, an inference from Microsoft's requirements ("DirectX 12
capable hardware", Windows 10 1709 = build 16299 or later, per the tensorflow-directml-plugin and
torch-directml READMEs quoted in compat-facts.md §5; the build comes from knowledge/directml.json,
the lowest `windows_min_build` of its packages):
- with dxdiag: the adapter's `DDI Version` is 12 or higher (or its `Feature Levels` list a 12_x
  level), and the Windows build is >= 16299 (or unknown while dxdiag says "DirectX 12");
- with Win32_VideoController only: a PCI GPU from NVIDIA, AMD, Intel or Qualcomm with its vendor's
  driver installed, on a Windows build >= 16299 (or an unknown build).
CUDA is not claimed from Win32_VideoController (nvidia-smi does that); from dxdiag it is claimed
only when dxdiag's System Devices entry for that very PCI device lists the CUDA driver (nvcuda.dll),
which the NVIDIA display driver installs.

NVIDIA's own driver numbering comes from the Windows one: the last five digits of the third and
fourth fields (31.0.15.5222 -> 552.22, 25.21.14.1701 -> 417.01); the Windows form stays in
`driver_version_raw`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..model import knowledge as kb
from ..errors import ParseError
from ..model.facts import Contribution, CpuFacts, DirectMlRuntime, GpuFacts, OsFacts, Runtimes
from ..scan.capture import Host
from ..model.vendors import hex_id, vendor_from_pci, vendor_from_text
from ._util import clean_text, first_parsed, load_json, nothing_read, parse_capture
from ..model.hw.amd import amd_device
from .windows_adapter import (ADAPTER_RAM_CAP as ADAPTER_RAM_CAP, Adapter as Adapter,
                              D3D12_VENDORS as D3D12_VENDORS, GPU_VENDORS as GPU_VENDORS, _NOT_GPU_NAME, _na,
                              _pci_parts, driver_date)
from .windows_wmi import (cpu_from_win32_processor as cpu_from_win32_processor,
                          parse_win32_json as parse_win32_json, parse_win32_list as parse_win32_list,
                          parse_win32_processor_json as parse_win32_processor_json,
                          parse_win32_processor_list as parse_win32_processor_list)

SOURCE = "windows"
# The CPU probe's own sources: where a bundle has one, it names the CPU (with its flags).
CPU_CAPTURES = ("proc-cpuinfo.txt", "lscpu.txt", "sysctl.txt", "py-cpuinfo.json")
MIB = 1024 * 1024
WINDOWS_11_BUILD = 22000
@dataclass
class DxDiag:
    system: Dict[str, str] = field(default_factory=dict)
    adapters: List[Adapter] = field(default_factory=list)
    # "10de:2204" -> {"SUBSYS_...&REV_..\\instance": [driver file names]}
    system_devices: Dict[str, Dict[str, List[str]]] = field(default_factory=dict)


# -- driver versions ---------------------------------------------------------------------------------


def nvidia_driver_from_windows(raw: Optional[str]) -> Optional[str]:
    """Windows driver version of an NVIDIA driver -> NVIDIA's numbering (31.0.15.5222 -> 552.22)."""
    if not raw:
        return None
    m = re.fullmatch(r"\s*\d+\.\d+\.(\d{1,3})\.(\d{1,4})\s*", raw)
    if not m:
        return None
    digits = (m.group(1) + m.group(2).zfill(4))[-5:].zfill(5)
    return f"{int(digits[:3])}.{digits[3:]}"


def _driver_for(vendor: str, raw: Optional[str]) -> Optional[str]:
    if vendor == "nvidia":
        return nvidia_driver_from_windows(raw) or raw
    return raw


# -- dxdiag /t --------------------------------------------------------------------------------------------


def decode_windows_text(data: Optional[bytes], keep_line_ends: bool = False) -> str:
    """A Windows tool's text in whatever encoding the machine wrote it: UTF-16 with or without a
    BOM (`dxdiag /t` and PowerShell redirection), UTF-8, or the ANSI code page of a localised
    Windows (cp1252, cp936, cp1251, ...; told apart by charset-normalizer, which requests brings).
    Line ends become LF."""
    if not data:
        return ""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", errors="replace")
    elif data.startswith(b"\xef\xbb\xbf"):
        text = data[3:].decode("utf-8", errors="replace")
    elif len(data) >= 4 and data[1::2].count(0) > len(data) // 4:
        text = data.decode("utf-16-le", errors="replace")  # ASCII-heavy UTF-16 without a BOM
    elif len(data) >= 4 and data[0::2].count(0) > len(data) // 4:
        text = data.decode("utf-16-be", errors="replace")
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = _named_code_page(data) or _legacy_code_page(data)
    if keep_line_ends:  # a report embeds the capture as it was, line ends and all
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


_LANGUAGE_LINE = re.compile(rb"^\s*Language:\s*([^\r\n(]+(?:\([^)\r\n]*\))?)\s*(?:\(Regional Setting:\s*([^\r\n]+?)\))?\s*$",
                            re.M)


def code_pages_for(language: str) -> List[str]:
    """The ANSI code page of a language as dxdiag names it (knowledge/windows_code_pages.json)."""
    low = language.strip().lower()
    return [str(r["code_page"]) for r in kb.rows("windows_code_pages", "languages")
            if isinstance(r.get("match"), str) and low.startswith(r["match"].lower())][:1]


def _named_code_page(data: bytes) -> Optional[str]:
    """dxdiag says which language the machine runs (`Language: Korean (Regional Setting: Korean)`, in
    ASCII whatever the code page): decode with that language's ANSI code page, then the regional
    setting's. A charset detector guesses wrong on text that is mostly ASCII (a Chinese or Korean
    dxdiag reads as cp1250 mojibake), so the machine's own word comes first."""
    m = _LANGUAGE_LINE.search(data[:4096])
    if not m:
        return None
    pages: List[str] = []
    for part in (m.group(1), m.group(2)):
        if part:
            pages.extend(p for p in code_pages_for(part.decode("ascii", "replace")) if p not in pages)
    for page in pages:
        try:
            return data.decode(page)
        except (UnicodeDecodeError, LookupError):
            continue
    return None


def _legacy_code_page(data: bytes) -> str:
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - requests brings it
        return data.decode("cp1252", errors="replace")
    best = from_bytes(data, cp_isolation=["cp1252", "cp936", "gb18030", "cp950", "cp932", "cp949", "cp1251",
                                          "cp1250", "cp1253", "cp1254", "cp1257"]).best()
    return str(best) if best is not None else data.decode("cp1252", errors="replace")


def _dxdiag_capture(host: Host, errors: List[str]) -> Optional["DxDiag"]:
    cap = host.get("dxdiag.txt")
    if not cap.ok:
        from ._util import note_failure

        note_failure(cap, errors)
        return None
    try:
        return parse_dxdiag(decode_windows_text(cap.data))
    except ParseError as exc:
        errors.append(f"dxdiag.txt: {exc}")
        return None

_KV = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 ./()&'_-]{0,40}?):\s?(.*)$")


def _sections(text: str) -> Dict[str, List[str]]:
    """dxdiag's report: each section is a title line between two lines of dashes."""
    lines = text.split("\n")
    out: Dict[str, List[str]] = {}
    current: Optional[List[str]] = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if (
            re.fullmatch(r"-{4,}\s*", line)
            and i + 2 < len(lines)
            and re.fullmatch(r"-{4,}\s*", lines[i + 2])
            and lines[i + 1].strip()
        ):
            title = lines[i + 1].strip()
            current = out.setdefault(title, [])
            i += 3
            continue
        if current is not None:
            current.append(line)
        i += 1
    return out


def _int_prefix(value: Optional[str]) -> Optional[int]:
    if not value:
        return None
    m = re.match(r"^\s*(\d+)", value)
    return int(m.group(1)) if m else None


def _identity_key(ven: str, dev: str) -> str:
    return f"{ven}:{dev}"


def parse_dxdiag(text: str) -> DxDiag:
    """`dxdiag /t`: System Information, Display Devices (one entry per output), System Devices."""
    text = clean_text(text)
    secs = _sections(text)
    if "System Information" not in secs and "Display Devices" not in secs:
        raise ParseError("no 'System Information' or 'Display Devices' section: not dxdiag /t output")
    out = DxDiag()
    for line in secs.get("System Information", []):
        m = _KV.match(line)
        if m:
            out.system.setdefault(m.group(1).strip(), m.group(2).strip())
    entries: List[Dict[str, str]] = []
    for line in secs.get("Display Devices", []):
        m = _KV.match(line)
        if not m:
            continue
        key, value = m.group(1).strip(), m.group(2).strip()
        if key == "Card name":
            entries.append({})
        if entries:
            entries[-1].setdefault(key, value)
    _system_devices(secs.get("System Devices", []), out)
    for e in entries:
        out.adapters.append(_adapter_from_dxdiag(e, out))
    out.adapters = _group(out.adapters)
    return out


def _system_devices(lines: List[str], out: DxDiag) -> None:
    current: Optional[Tuple[str, str]] = None
    for line in lines:
        m = _KV.match(line)
        if not m:
            continue
        key, value = m.group(1).strip(), m.group(2).strip()
        if key == "Name":
            current = None
        elif key == "Device ID":
            parts = _pci_parts(value)
            current = None
            if parts:
                ident = _identity_key(parts[0], parts[1])
                instance = f"{parts[2]}:{parts[3]}:{parts[4]}"
                out.system_devices.setdefault(ident, {}).setdefault(instance, [])
                current = (ident, instance)
        elif key == "Driver" and current is not None:
            path = value.split(",")[0].strip()
            out.system_devices[current[0]][current[1]].append(path.replace("/", "\\").split("\\")[-1].lower())


def _adapter_from_dxdiag(e: Dict[str, str], dx: DxDiag) -> Adapter:
    key = e.get("Device Key", "")
    parts = _pci_parts(key)
    ven = hex_id(_na(e.get("Vendor ID")))
    dev = hex_id(_na(e.get("Device ID")))
    subsys = rev = None
    if parts:
        if (ven and ven != "0x" + parts[0]) or (dev and dev != "0x" + parts[1]):
            parts = None  # the Device Key and the id lines disagree: a damaged entry, not a device
        else:
            ven, dev = "0x" + parts[0], "0x" + parts[1]
            subsys, rev = parts[2], parts[3]
    levels = tuple(x.strip() for x in (e.get("Feature Levels") or "").split(",") if x.strip())
    ad = Adapter(
        name=_na(e.get("Card name")) or _na(e.get("Chip type")),
        manufacturer=_na(e.get("Manufacturer")),
        pci_vendor_id=ven,
        pci_device_id=dev,
        subsys=subsys,
        revision=("0x" + rev) if rev else None,
        pci=parts is not None,
        driver_version_raw=_na(e.get("Driver Version")),
        driver_date=driver_date(_na((e.get("Driver Date/Size") or "").split(",")[0])),
        dedicated_mib=_int_prefix(e.get("Dedicated Memory")),
        ddi_version=_int_prefix(e.get("DDI Version")),
        feature_levels=levels,
        driver_model=_na(e.get("Driver Model")),
        hybrid=_na(e.get("Hybrid Graphics GPU")),
    )
    if ad.name and re.search(r"basic display adapter", ad.name, re.I):
        ad.vendor_driver = False
    if parts:
        instances = dx.system_devices.get(_identity_key(parts[0], parts[1]), {})
        drivers = {d for files in instances.values() for d in files}
        ad.cuda_driver = bool(drivers & {"nvcuda.dll", "nvcuda64.dll"})
        ad.count = max(1, len(instances))
    return ad


def _group(adapters: List[Adapter]) -> List[Adapter]:
    """One Display Device per monitor output -> one entry per PCI device (vendor:device); the
    physical count comes from System Devices. Non-PCI adapters group by name."""
    out: List[Adapter] = []
    seen: Dict[Tuple[Any, ...], int] = {}
    for a in adapters:
        ident: Tuple[Any, ...] = (
            ("pci", a.pci_vendor_id, a.pci_device_id)
            if a.pci and a.pci_device_id
            else ("other", a.name, a.pci)
        )
        if ident in seen:
            kept = out[seen[ident]]
            kept.count = max(kept.count, a.count)
            kept.cuda_driver = kept.cuda_driver or a.cuda_driver
            continue
        seen[ident] = len(out)
        out.append(a)
    return out


def windows_build(os_line: Optional[str]) -> Optional[int]:
    """ "Windows 11 Pro 64-bit (10.0, Build 22631) (...)" -> 22631."""
    if not os_line:
        return None
    m = re.search(r"\bBuild\s+(\d{4,6})", os_line)
    return int(m.group(1)) if m else None


def os_from_dxdiag(dx: DxDiag) -> Optional[OsFacts]:
    line = dx.system.get("Operating System")
    if not line:
        return None
    build = windows_build(line)
    distro = re.sub(r"\s*\(.*$", "", line).strip() or None
    # "(10.0, Build 19045)"; Windows 7 says "(6.1, Build 7601)", Vista "(6.0, ...)", 8.1 "(6.3, ...)"
    nt = re.search(r"\((\d+\.\d+),\s*Build\s+\d+", line)
    kernel = nt.group(1) if nt else ("10.0" if build and build >= 10240 else None)
    if kernel == "10.0" and build:
        release: Optional[str] = "11" if build >= WINDOWS_11_BUILD else "10"
    else:
        named = re.search(r"\bWindows\s+(Vista|XP|7|8\.1|8|2000|Server \d{4}(?: R2)?)\b", line)
        release = named.group(1) if named else None
    return OsFacts(
        system="Windows",
        release=release,
        version=f"{kernel}.{build}" if build and kernel else None,
        distro=distro,
        wsl=False,
        windows_build=build,
    )


def cpu_from_dxdiag(dx: DxDiag) -> Optional[CpuFacts]:
    """ "Processor: AMD Ryzen 7 5800X 8-Core Processor   (16 CPUs), ~3.8GHz"."""
    line = dx.system.get("Processor")
    if not line:
        return None
    m = re.match(r"^(.*?)\s*\((\d+)\s+CPUs\)", line)
    model = " ".join((m.group(1) if m else re.sub(r",\s*~.*$", "", line)).split()) or None
    threads = int(m.group(2)) if m else None
    low = (model or "").lower()
    if "intel" in low:
        vendor, arch = "intel", "x86_64"
    elif re.search(r"\bamd\b", low):
        vendor, arch = "amd", "x86_64"
    elif re.search(r"snapdragon|qualcomm|microsoft sq", low):
        vendor, arch = "qualcomm", "aarch64"
    else:
        vendor, arch = None, None
    return CpuFacts(vendor=vendor, model=model, arch=arch, threads=threads, source="dxdiag.txt")


# -- adapters -> facts -------------------------------------------------------------------------------------


def directml_min_build() -> Optional[int]:
    """The oldest Windows build any DirectML package supports (directml.json: 16299, Windows 10 1709)."""
    builds = [r["windows_min_build"] for r in kb.rows("directml", "packages")
              if isinstance(r.get("windows_min_build"), int)]
    return min(builds) if builds else None


def _vendor(a: Adapter) -> str:
    return (
        vendor_from_pci(a.pci_vendor_id)
        or vendor_from_text(a.manufacturer)
        or vendor_from_text(a.name)
        or "unknown"
    )


def is_gpu(a: Adapter) -> bool:
    """A PCI adapter from a GPU vendor; where the capture has no PNPDeviceID at all (a `Select-Object`
    without it), a named adapter from a GPU vendor."""
    if a.pci is False:
        return False
    if a.pci is None and not a.name:
        return False
    if _vendor(a) not in GPU_VENDORS:
        return False
    return not (a.name and _NOT_GPU_NAME.search(a.name))


def _integrated(a: Adapter, vendor: str, amd_integrated: Optional[bool]) -> Optional[bool]:
    if a.hybrid:
        if a.hybrid.lower().startswith("integrated"):
            return True
        if a.hybrid.lower().startswith("discrete"):
            return False
    if vendor == "amd":
        return amd_integrated
    if vendor == "nvidia":
        from ..model.hw.nvidia import integrated_for

        return integrated_for(a.name) if a.name else False
    if vendor == "intel":
        # Intel's discrete cards: Arc A/B-series (A380, A770, B580...), Iris Xe MAX (DG1).
        return not bool(
            a.name and re.search(r"\bArc\b.*\b[AB]\d{3}\b|Iris\(R\) Xe MAX|\bDG1\b", a.name, re.I)
        )
    if vendor in ("qualcomm", "arm", "apple"):
        return True
    return None


def _d3d12(a: Adapter) -> bool:
    if a.ddi_version is not None:
        return a.ddi_version >= 12 or any(lvl.startswith("12_") for lvl in a.feature_levels)
    return any(lvl.startswith("12_") for lvl in a.feature_levels)


def to_gpu_facts(a: Adapter, build: Optional[int], directx12: bool, from_dxdiag: bool) -> GpuFacts:
    vendor = _vendor(a)
    gfx, amd_int = amd_device(a.pci_device_id, a.revision) if vendor == "amd" else (None, None)
    integrated = _integrated(a, vendor, amd_int)
    notes: List[str] = []
    memory: Optional[int] = None
    if a.dedicated_mib is not None and a.dedicated_mib > 0:
        if integrated:
            notes.append(f"integrated GPU: shares system memory ({a.dedicated_mib} MB dedicated carve-out)")
        else:
            memory = a.dedicated_mib * MIB
    elif a.adapter_ram is not None:
        if a.adapter_ram >= ADAPTER_RAM_CAP:
            notes.append(
                "Win32_VideoController.AdapterRAM is a 32-bit field capped at 4 GiB; "
                "the real memory size is unknown here (dxdiag's Dedicated Memory says it)"
            )
        elif not integrated:
            memory = a.adapter_ram
    apis: List[str] = []
    minimum = directml_min_build()
    build_ok = build >= minimum if build is not None and minimum is not None else None
    if a.vendor_driver:
        if from_dxdiag:
            if _d3d12(a) and (build_ok or (build_ok is None and directx12)):
                apis.append("directml")
        elif vendor in D3D12_VENDORS and build_ok is not False and a.driver_version_raw:
            apis.append("directml")
        if vendor == "nvidia" and a.cuda_driver:
            apis.insert(0, "cuda")
    else:
        notes.append("no vendor driver installed (Microsoft Basic Display Adapter)")
    raw = a.driver_version_raw if a.vendor_driver else None
    name = a.name if a.vendor_driver else None
    cc = arch = None
    if vendor == "nvidia" and name:
        from ..model.hw.nvidia import architecture_for, compute_capability_for

        cc = compute_capability_for(name)
        arch = architecture_for(cc)
    return GpuFacts(
        vendor=vendor,
        name=name,
        driver_version=_driver_for(vendor, raw),
        driver_version_raw=raw,
        driver_date=a.driver_date if a.vendor_driver else None,
        compute_capability=cc,
        architecture=arch,
        memory_bytes=memory,
        integrated=integrated,
        apis=tuple(apis),
        gfx_target=gfx,
        pci_vendor_id=a.pci_vendor_id,
        pci_device_id=a.pci_device_id,
        sources=(SOURCE,),
        notes=tuple(notes),
    )


def parse_wsl_dxg(text: str) -> Dict[str, Any]:
    """mlprobe's wsl-dxg.json: {"dev_dxg": bool, "wsl_lib": [file names in /usr/lib/wsl/lib]}."""
    doc = load_json(text, "wsl-dxg.json")
    if not isinstance(doc, dict) or "dev_dxg" not in doc:
        raise ParseError("wsl-dxg.json has no dev_dxg")
    libs = doc.get("wsl_lib")
    names = sorted(str(x) for x in libs if isinstance(x, str)) if isinstance(libs, list) else []
    return {"dev_dxg": bool(doc.get("dev_dxg")), "wsl_lib": names}


# -- the probe -----------------------------------------------------------------------------------------------


def _host_build(host: Host) -> Optional[int]:
    version = host.info().get("version")
    if isinstance(version, str):
        m = re.match(r"^10\.0\.(\d+)", version)
        if m:
            return int(m.group(1))
    return None


def _expand(adapters: Iterable[Adapter]) -> List[Adapter]:
    out: List[Adapter] = []
    for a in adapters:
        out.extend([a] * max(1, min(a.count, 16)))
    return out


def probe(host: Host) -> Contribution:
    out = Contribution()
    live = host.kind == "live"
    errors: List[str] = []
    from_dxdiag = False
    dx: Optional[DxDiag] = None
    adapters = first_parsed(
        host, (("Win32_VideoController.json", parse_win32_json), ("Win32_VideoController.txt", parse_win32_list)),
        errors,
    )
    # dxdiag takes 5-20 s live (more than the probe's deadline allows on a slow machine), so a
    # live scan asks for it only when WMI said nothing; `mlprobe capture` always takes it.
    if not (live and adapters is not None):
        dx = _dxdiag_capture(host, errors)
    if dx is not None and (dx.adapters or adapters is None):
        adapters, from_dxdiag = dx.adapters, True
    build = _host_build(host) or (windows_build(dx.system.get("Operating System")) if dx else None)
    directx12 = bool(dx and re.search(r"DirectX 1[2-9]", dx.system.get("DirectX Version", "")))
    wsl = parse_capture(host, "wsl-dxg.json", parse_wsl_dxg, errors)
    if adapters is None and wsl is None:
        if not live and not any(host.get(n).ok for n in CPU_CAPTURES):
            wmi_cpu = first_parsed(host, (("Win32_Processor.json", parse_win32_processor_json),
                                          ("Win32_Processor.txt", parse_win32_processor_list)), errors)
            if wmi_cpu is not None:
                out.cpu = wmi_cpu
                return out
        return nothing_read(out, errors, "no dxdiag, Win32_VideoController or WSL GPU capture")
    gpus = [to_gpu_facts(a, build, directx12, from_dxdiag) for a in _expand(adapters or []) if is_gpu(a)]
    out.gpus = gpus
    dml = [g.name or "GPU" for g in gpus if "directml" in g.apis]
    if dml:
        out.runtimes = Runtimes(directml=DirectMlRuntime.of(windows_build=build, adapters=tuple(dict.fromkeys(dml))))
    if wsl is not None and wsl["dev_dxg"]:
        out.runtimes = Runtimes(directml=DirectMlRuntime.of(
            wsl=True,
            dev_dxg=True,
            wsl_lib=tuple(wsl["wsl_lib"]),
            d3d12="libd3d12.so" in wsl["wsl_lib"],
            dxcore="libdxcore.so" in wsl["wsl_lib"],
            cuda=any(n.startswith("libcuda.so") for n in wsl["wsl_lib"]),
        ))
    if dx is not None and not host.get("host.json").ok:
        # OS facts only where the bundle has nothing better (no host.json).
        out.os = os_from_dxdiag(dx)
    if not live and not any(host.get(n).ok for n in CPU_CAPTURES):
        # The CPU by name, where the bundle has no CPU source of its own (live scans read it through
        # py-cpuinfo): WMI's Win32_Processor (cores, threads), else dxdiag's Processor line.
        wmi_cpu = first_parsed(host, (("Win32_Processor.json", parse_win32_processor_json),
                                      ("Win32_Processor.txt", parse_win32_processor_list)), errors)
        out.cpu = wmi_cpu or (cpu_from_dxdiag(dx) if dx is not None else None)
    if errors:
        out.warnings.extend(errors)
    return out


__all__ = [
    "Adapter",
    "DxDiag",
    "is_gpu",
    "nvidia_driver_from_windows",
    "decode_windows_text",
    "parse_dxdiag",
    "parse_win32_json",
    "parse_win32_list",
    "parse_win32_processor_json",
    "parse_win32_processor_list",
    "parse_wsl_dxg",
    "probe",
    "to_gpu_facts",
    "windows_build",
]
