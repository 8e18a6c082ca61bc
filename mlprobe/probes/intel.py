"""Intel GPUs from the DRM cards in sysfs (`drm-drivers.txt`), oneAPI's `sycl-ls` and Intel's
`xpu-smi discovery` (Linux and Windows), plus the Intel GPU table.

`sycl-ls` lists every device once per backend (Level Zero, OpenCL, and Mesa's rusticl or other
vendors' backends too): one GPU listed by Level Zero and again by OpenCL is one GPU. The device set
is the Level Zero list where there is one (PyTorch's XPU backend runs on Level Zero), otherwise the
OpenCL list of Intel's own platform; other platforms (rusticl, CUDA, HIP) never add an Intel GPU.
`xpu-smi discovery` lists each GPU once, with its PCI address. The sources are combined in the
order drm-drivers, xpu-smi, sycl-ls: the first that lists Intel GPUs defines the device set, the
later ones fill names and fields of the same devices (same bus id, same PCI id, same name, or the
one device on both sides).

`drm-drivers.txt` has one line per DRM card: `card0 0000:00:02.0 0x8086 0x3e92 i915` (card, PCI bus
id, vendor id, device id, bound driver or `-`). This probe adds what only Intel knowledge gives: the
marketing name, the generation, integrated or discrete, and whether PyTorch's XPU backend covers the
GPU (then apis=("xpu",), but only while the i915 or xe kernel driver is bound: without it nothing
can reach the GPU). The pci and opencl probes see the same device; scan.py merges them by bus id or
PCI device id.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Dict, List, NamedTuple, Optional

from ..model import knowledge as kb
from ..errors import ParseError
from ..model.facts import Contribution, CpuFacts, GpuFacts
from ..scan.capture import Host
from ..model.vendors import hex_id, normalise_bus_id
from ._util import nothing_read, parse_capture
from ..model.hw.intel import intel_gpu_info, intel_gpu_info_by_name

INTEL_VENDOR_ID = "0x8086"
XPU_DRIVERS = ("i915", "xe")
# What each device's `sources` names: the tool that listed it ("seen by"), not this probe. The DRM
# cards in sysfs keep the probe's own name, "intel".
SYCL_LS = "sycl-ls"
XPU_SMI = "xpu-smi"


class DrmCard(NamedTuple):
    card: str
    pci_bus_id: Optional[str]
    vendor_id: str  # "0x8086"
    device_id: str  # "0x3e92"
    driver: Optional[str]  # None when no driver is bound


_LINE = re.compile(
    r"^\s*(card\d+)\s+(\S+)\s+(?:0x)?([0-9a-fA-F]{4})\s+(?:0x)?([0-9a-fA-F]{4})(?:\s+(\S+))?\s*$")


def parse_drm_drivers(text: str) -> List[DrmCard]:
    """`drm-drivers.txt` -> one DrmCard per well-formed line (other lines are skipped).

    Empty text is no card; text with no card line at all is not this format (ParseError)."""
    cards: List[DrmCard] = []
    seen = set()
    lines = [ln for ln in text.replace("\r", "\n").split("\n") if ln.strip()]
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        card, bus, vendor, device, driver = m.groups()
        if card in seen:
            continue  # a repeated line is the same card
        seen.add(card)
        cards.append(DrmCard(
            card=card, pci_bus_id=normalise_bus_id(bus), vendor_id=f"0x{vendor.lower()}",
            device_id=f"0x{device.lower()}", driver=None if driver in (None, "-") else driver))
    if lines and not cards:
        raise ParseError("drm-drivers.txt has no `cardN BUS VENDOR DEVICE DRIVER` line")
    return cards


def gpu_from_card(card: DrmCard) -> GpuFacts:
    info = intel_gpu_info(card.device_id)
    notes = []
    if info is None:
        notes.append(f"Intel GPU {card.device_id} is not in mlprobe's Intel GPU table")
    if card.driver is None:
        notes.append("no kernel driver is bound to this GPU (i915 or xe is needed)")
    elif card.driver not in XPU_DRIVERS:
        notes.append(f"bound to the {card.driver} driver, not i915 or xe")
    xpu = bool(info and info.get("xpu_supported")) and card.driver in XPU_DRIVERS
    return GpuFacts(
        vendor="intel", name=info.get("name") if info else None,
        integrated=(not info["discrete"]) if info and isinstance(info.get("discrete"), bool) else None,
        apis=("xpu",) if xpu else (), architecture=info.get("generation") if info else None,
        pci_bus_id=card.pci_bus_id, pci_vendor_id=card.vendor_id, pci_device_id=card.device_id,
        sources=("intel",), notes=tuple(notes),
    )


# -- sycl-ls ------------------------------------------------------------------------------------------


class SyclDevice(NamedTuple):
    backend: str  # "level_zero", "opencl", "cuda", "hip", "native_cpu" ("ext_oneapi_" dropped)
    kind: str  # "gpu", "cpu", "acc", "fpga"
    platform: str  # "Intel(R) OpenCL Graphics", "rusticl", ...
    name: str  # "Intel(R) Arc(TM) A770 Graphics"
    driver: Optional[str]  # the bracketed version at the end of the line
    # The device's number as sycl-ls prints it (`[opencl:gpu:2]`, `[level_zero:gpu][level_zero:1]`):
    # two identical cards differ only here. None where the line carries none.
    number: Optional[int] = None


# [opencl:gpu:2] Platform, Device OpenCL 3.0 NEO  [24.05.28454.6]           (oneAPI 2023-2024)
# [level_zero:gpu][level_zero:0] Platform, Device 12.55.8 [1.3.29735+27]      (oneAPI 2024.1 and later)
_SYCL_LINE = re.compile(
    r"^\s*\[(?:ext_oneapi_)?(?P<backend>[a-z_]+):(?P<kind>[a-z]+)(?::(?P<index>\d+))?\]"
    r"(?:\[(?:ext_oneapi_)?[a-z_]+:(?P<index2>\d+)\])?\s+(?P<platform>[^,\[]+?),\s*(?P<rest>.*?)\s*"
    r"(?:\[(?P<driver>[^\]]*)\])?\s*$")
_SYCL_VERSION_TAIL = re.compile(r"\s+(?:OpenCL\s+\d+\.\d+(?:\s+NEO)?|\d+(?:\.\d+)+)\s*$")
_PCI_IN_NAME = re.compile(r"\[0x([0-9a-fA-F]{4})\]")


def parse_sycl_ls(text: str) -> List[SyclDevice]:
    """`sycl-ls` (plain or `--verbose`: only the device lines at the top are read)."""
    devices: List[SyclDevice] = []
    for line in text.replace("\r", "\n").split("\n"):
        m = _SYCL_LINE.match(line)
        if not m:
            continue
        name = _SYCL_VERSION_TAIL.sub("", m.group("rest")).strip()
        if not name:
            continue
        index = m.group("index") or m.group("index2")
        dev = SyclDevice(m.group("backend"), m.group("kind"), m.group("platform").strip(), name,
                         (m.group("driver") or "").strip() or None, int(index) if index else None)
        # The same line twice is a paste's repeat; two identical cards differ in their number.
        if dev not in devices:
            devices.append(dev)
    if text.strip() and not devices:
        raise ParseError("no `[backend:type] platform, device` line: not sycl-ls output")
    return devices


def _is_intel_name(name: str) -> bool:
    return bool(re.match(r"^\s*Intel\b", name, re.I))


def sycl_intel_gpus(devices: List[SyclDevice]) -> List[List[SyclDevice]]:
    """The Intel GPUs by backend, the device-defining list first: Level Zero, then Intel's own
    OpenCL platform (rusticl, Mesa and other vendors' platforms are left out)."""
    gpus = [d for d in devices if d.kind == "gpu" and _is_intel_name(d.name)]
    l0 = [d for d in gpus if d.backend == "level_zero"]
    ocl = [d for d in gpus if d.backend == "opencl" and re.search(r"\bIntel\b", d.platform, re.I)
           and not re.search(r"rusticl|mesa|clover", d.platform, re.I)]
    return [l0, ocl]


def _discrete_by_name(name: Optional[str]) -> Optional[bool]:
    if not name:
        return None
    return bool(re.search(r"\bArc\b.*\b(?:Pro\s+)?[AB]\d{2,3}[A-Z]?\b|Data Center GPU|Iris\(R\) Xe MAX|\bDG1\b|"
                          r"\bFlex\b", name, re.I))


def _xpu_name(name: Optional[str]) -> bool:
    return bool(name) and any(re.search(str(r["pattern"]), str(name), re.I)
                              for r in kb.rows("intel_gpus", "xpu_supported_names") if "pattern" in r)


def gpu_from_sycl(dev: SyclDevice) -> GpuFacts:
    pci = _PCI_IN_NAME.search(dev.name)
    pci_id = f"0x{pci.group(1).lower()}" if pci else None
    info = intel_gpu_info(pci_id) if pci_id else intel_gpu_info_by_name(dev.name)
    name = (info.get("name") if info else None) or dev.name
    discrete = info.get("discrete") if info and isinstance(info.get("discrete"), bool) else _discrete_by_name(name)
    xpu = dev.backend == "level_zero" and (bool(info["xpu_supported"]) if info and "xpu_supported" in info
                                           else _xpu_name(name))
    apis = ("xpu",) if xpu else ("opencl",) if dev.backend == "opencl" else ()
    return GpuFacts(
        # Level Zero's bracket is its runtime's version; Intel's OpenCL platform prints the driver's
        vendor="intel", name=name, driver_version=dev.driver if dev.backend == "opencl" else None,
        integrated=(not discrete) if discrete is not None else None, apis=apis,
        architecture=info.get("generation") if info else None, pci_vendor_id=INTEL_VENDOR_ID,
        pci_device_id=pci_id, sources=(SYCL_LS,),
        notes=(f"listed by sycl-ls ({dev.backend}, {dev.platform})",))


# -- xpu-smi discovery ----------------------------------------------------------------------------------


def parse_xpu_smi_discovery(text: str) -> List[Dict[str, str]]:
    """`xpu-smi discovery` (the boxed table; `-d N` prints one device with more keys): one dict of
    `Key: value` per Device ID, keys as printed ("Device Name", "PCI BDF Address", "PCI Device ID")."""
    devices: List[Dict[str, str]] = []
    current: Optional[Dict[str, str]] = None
    for line in text.replace("\r", "\n").split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.strip().startswith("|") else []
        if len(cells) < 2:
            continue
        head, body = cells[0], cells[1]
        if head.isdigit():
            current = {"Device ID": head}
            devices.append(current)
        elif head and head != "Device ID":
            continue
        if current is None:
            continue
        kv = re.match(r"^([A-Za-z][A-Za-z0-9 ./()-]*?):\s*(.*)$", body)
        if kv:
            current.setdefault(kv.group(1).strip(), kv.group(2).strip())
    devices = [d for d in devices if d.get("Device Name") or d.get("PCI BDF Address")]
    if text.strip() and not devices and "Device ID" not in text:
        raise ParseError("no `| Device ID | Device Information |` table: not xpu-smi discovery output")
    return devices


def gpu_from_xpu_smi(dev: Dict[str, str]) -> GpuFacts:
    pci_id = hex_id(dev.get("PCI Device ID")) if dev.get("PCI Device ID") else None
    name = dev.get("Device Name")
    m = _PCI_IN_NAME.search(name or "")
    if pci_id is None and m:
        pci_id = f"0x{m.group(1).lower()}"
    info = intel_gpu_info(pci_id) if pci_id else None
    if info and info.get("name") and (not name or _PCI_IN_NAME.search(name)):
        name = str(info["name"])
    kind = (dev.get("Device Type") or "").lower()
    discrete = (True if "discrete" in kind else False if "integrated" in kind else
                info.get("discrete") if info and isinstance(info.get("discrete"), bool) else _discrete_by_name(name))
    xpu = bool(info.get("xpu_supported")) if info else _xpu_name(name)
    return GpuFacts(
        vendor="intel", name=name, integrated=(not discrete) if discrete is not None else None,
        apis=("xpu",) if xpu else (), architecture=info.get("generation") if info else None,
        pci_bus_id=normalise_bus_id(dev.get("PCI BDF Address")), pci_vendor_id=INTEL_VENDOR_ID,
        pci_device_id=pci_id, sources=(XPU_SMI,), notes=("listed by xpu-smi discovery",))


# -- the probe ----------------------------------------------------------------------------------------


def _fill(a: GpuFacts, b: GpuFacts) -> GpuFacts:
    changes: Dict[str, Any] = {}
    for name in ("name", "integrated", "architecture", "pci_bus_id", "pci_device_id", "driver_version"):
        if getattr(a, name) is None and getattr(b, name) is not None:
            changes[name] = getattr(b, name)
    sources = tuple(dict.fromkeys(a.sources + b.sources))
    if sources != a.sources:
        changes["sources"] = sources
    apis = tuple(dict.fromkeys(a.apis + b.apis))
    if apis != a.apis:
        changes["apis"] = apis
    notes = tuple(dict.fromkeys(a.notes + b.notes))
    if notes != a.notes:
        changes["notes"] = notes
    return replace(a, **changes) if changes else a


def _same(a: GpuFacts, b: GpuFacts) -> bool:
    if a.pci_bus_id and b.pci_bus_id:
        return a.pci_bus_id == b.pci_bus_id
    if a.pci_device_id and b.pci_device_id:
        return a.pci_device_id == b.pci_device_id
    return bool(a.name and b.name and a.name.lower() == b.name.lower())


def combine(lists: List[List[GpuFacts]]) -> List[GpuFacts]:
    """The first non-empty list is the device set; later lists fill fields of the same devices."""
    base: Optional[List[GpuFacts]] = None
    for gpus in lists:
        if not gpus:
            continue
        if base is None:
            base = list(gpus)
            continue
        taken: set[int] = set()
        for g in gpus:
            i = next((i for i, b in enumerate(base) if i not in taken and _same(b, g)), None)
            if i is None and len(base) == 1 and len(gpus) == 1:
                i = 0
            if i is not None:
                taken.add(i)
                base[i] = _fill(base[i], g)
    return base or []


def probe(host: Host) -> Contribution:
    out = Contribution()
    errors: List[str] = []
    cards = parse_capture(host, "drm-drivers.txt", parse_drm_drivers, errors)
    smi = parse_capture(host, "xpu-smi-discovery.txt", parse_xpu_smi_discovery, errors)
    sycl = parse_capture(host, "sycl-ls.txt", parse_sycl_ls, errors)
    if cards is None and smi is None and sycl is None:
        return nothing_read(out, errors, "no DRM cards, xpu-smi or sycl-ls output (not Linux, no GPU "
                                         "driver loaded, or no oneAPI tools)")
    drm = [gpu_from_card(c) for c in cards or [] if c.vendor_id == INTEL_VENDOR_ID]
    by_backend = [[gpu_from_sycl(d) for d in devs] for devs in sycl_intel_gpus(sycl or [])]
    out.gpus = combine([drm, [gpu_from_xpu_smi(d) for d in smi or []], combine(by_backend)])
    # sycl-ls lists the host CPU as an OpenCL CPU device ("Intel(R) OpenCL, Intel(R) Xeon(R) w5-3435X")
    out.cpu_hints = [CpuFacts(model=re.sub(r"\s+OpenCL\s+\d+\.\d+.*$", "", " ".join(d.name.split())),
                              source="sycl-ls.txt")
                     for d in sycl or [] if d.kind == "cpu" and d.name][:1]
    if sycl and not any(d.backend == "level_zero" for d in sycl) and any(
            d.kind == "gpu" and _is_intel_name(d.name) for d in sycl):
        out.warnings.append("sycl-ls lists the Intel GPU through OpenCL only, not Level Zero: PyTorch's "
                            "XPU backend needs Level Zero (Intel's compute runtime, libze1 / "
                            "intel-level-zero-gpu)")
    out.warnings.extend(errors)
    return out


__all__ = ["DrmCard", "SyclDevice", "combine", "gpu_from_card", "gpu_from_sycl", "gpu_from_xpu_smi",
           "intel_gpu_info", "parse_drm_drivers", "parse_sycl_ls", "parse_xpu_smi_discovery", "probe",
           "sycl_intel_gpus"]
