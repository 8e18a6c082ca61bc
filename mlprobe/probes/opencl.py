"""OpenCL: live through pyopencl in a child process; in replay from mlprobe-opencl.json,
clinfo.json or clinfo.txt. A CPU device (PoCL) is not a GPU; a GPU device becomes a `gpus` entry."""

from __future__ import annotations

import re
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from ..errors import ParseError
from ..model.facts import Contribution, CpuFacts, GpuFacts, OpenClDevice, OpenClPlatform, OpenClRuntime, Runtimes
from ..scan.capture import Host
from ..model.vendors import hex_id, normalise_bus_id, vendor_from_pci, vendor_from_text
from ._util import ANSI, first_parsed, load_json, nothing_read

def _to_int(v: Any) -> Optional[int]:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        m = re.match(r"^\s*(\d+)", v)
        if m:
            return int(m.group(1))
    return None


def _str(v: Any) -> Optional[str]:
    if v is None:
        return None
    if isinstance(v, str):
        return v.strip() or None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return None


def _bool(v: Any) -> Optional[bool]:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v != 0
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("yes", "true", "1"):
            return True
        if s in ("no", "false", "0"):
            return False
    return None


def _dev_from_dict(d: Dict[str, Any]) -> OpenClDevice:
    return OpenClDevice(
        name=_str(d.get("name")), type=_norm_type(d.get("type")), vendor=_str(d.get("vendor")),
        driver_version=_str(d.get("driver_version")), version=_str(d.get("version")),
        opencl_c_version=_str(d.get("opencl_c_version")), compute_units=_to_int(d.get("compute_units")),
        global_memory_bytes=_to_int(d.get("global_memory_bytes")), fp16=_bool(d.get("fp16")),
        fp64=_bool(d.get("fp64")), board_name=_str(d.get("board_name")), pci_bus_id=_str(d.get("pci_bus_id")),
        host_unified_memory=_bool(d.get("host_unified_memory")),
        compute_capability=_cc(d.get("compute_capability")),
    )


def _cc(v: Any) -> Optional[str]:
    """NVIDIA's compute capability as clinfo prints it ("8.6"), or (major, minor) from JSON."""
    if isinstance(v, (list, tuple)) and len(v) == 2:
        major, minor = _to_int(v[0]), _to_int(v[1])
        ok = major is not None and minor is not None and 1 <= major <= 99 and 0 <= minor <= 99
        return f"{major}.{minor}" if ok else None
    m = re.match(r"^\s*(\d{1,2})\.(\d{1,2})\b", v) if isinstance(v, str) else None
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


_TYPES = ("GPU", "CPU", "ACCELERATOR", "CUSTOM", "DEFAULT")


def _norm_type(t: Any) -> Optional[str]:
    """'GPU', 'CL_DEVICE_TYPE_GPU', ['CL_DEVICE_TYPE_CPU'], 'Accelerator' -> 'GPU'/'CPU'/...

    Whole words only, so that a damaged value ('CPGPU') is not read as a GPU."""
    if not t:
        return None
    if isinstance(t, (list, tuple)):
        t = " ".join(str(x) for x in t)
    if not isinstance(t, str):
        return None
    words = re.findall(r"[A-Z]+", t.upper())
    for kind in _TYPES:
        if kind in words:
            return kind
    return None


def parse_mlprobe_json(text: str) -> List[OpenClPlatform]:
    doc = load_json(text, "mlprobe-opencl.json")
    if not isinstance(doc, dict) or not isinstance(doc.get("platforms"), list):
        raise ParseError("mlprobe-opencl.json has no `platforms` list")
    out = []
    for p in doc["platforms"]:
        if not isinstance(p, dict):
            continue
        raw_devs = p.get("devices")
        devs = tuple(_dev_from_dict(d) for d in (raw_devs if isinstance(raw_devs, list) else []) if isinstance(d, dict))
        out.append(OpenClPlatform(name=_str(p.get("name")), vendor=_str(p.get("vendor")),
                                  version=_str(p.get("version")), devices=devs))
    return out


# clinfo (full) key -> field. Both the modern `clinfo` (Oblomov's, "Key      value") and the older
# AMD APP SDK clinfo ("Key:<tabs> value", "Name:", "Board name:", "Device Topology: PCI[ B#0, D#7, F#0 ]").
_PLATFORM_KEYS = {"platform name": "name", "platform vendor": "vendor", "platform version": "version"}
_DEVICE_KEYS = {
    "device name": "name", "name": "name", "device type": "type", "device vendor": "vendor",
    "vendor": "vendor", "device vendor id": "vendor_id", "vendor id": "vendor_id",
    "driver version": "driver_version", "device version": "version", "version": "version",
    "device opencl c version": "opencl_c_version", "opencl c version": "opencl_c_version",
    "max compute units": "compute_units", "global memory size": "global_memory_bytes",
    "device board name (amd)": "board_name", "board name": "board_name",
    "device topology (amd)": "pci_bus_id", "device topology (nv)": "pci_bus_id",
    "device pci bus info (khr)": "pci_bus_id", "device topology": "pci_bus_id",
    "half-precision floating-point support": "fp16", "double-precision floating-point support": "fp64",
    "unified memory for host and device": "host_unified_memory",
    "integrated memory (nv)": "integrated_memory_nv",
    "compute capability (nv)": "compute_capability", "nvidia compute capability": "compute_capability",
    "device extensions": "extensions", "extensions": "extensions",
}


def _split_clinfo_line(line: str) -> Optional[Tuple[str, str]]:
    s = line.strip()
    if not s:
        return None
    m = re.match(r"^([A-Za-z][A-Za-z0-9 ()\-/_.,]*?):\s+(.*)$", s)  # old "Key: value"
    if m and "  " not in m.group(1):
        return m.group(1).strip().lower(), m.group(2).strip()
    m = re.match(r"^(\S.*?)\s{2,}(\S.*)$", s)  # modern "Key      value"
    if m:
        return m.group(1).strip().lower(), m.group(2).strip()
    return None


def _topology_bus_id(value: str) -> Optional[str]:
    """'PCI-E, 0000:03:00.0' (clinfo) or 'PCI[ B#1, D#0, F#0 ]' (AMD APP SDK, decimal) -> '0000:03:00.0'."""
    m = re.search(r"B#\s*(\d+)\s*,\s*D#\s*(\d+)\s*,\s*F#\s*(\d+)", value)
    if m:
        bus, dev, fn = (int(g) for g in m.groups())
        if bus > 255 or dev > 31 or fn > 7:
            return None
        return f"0000:{bus:02x}:{dev:02x}.{fn}"
    return normalise_bus_id(value)


def _old_style(text: str) -> bool:
    """AMD APP SDK clinfo: 'Platform Name:' / 'Device Type:' with a colon; devices start at 'Device Type:'."""
    return re.search(r"^\s*(?:Number of platforms|Platform Name|Device Type):", text, re.M) is not None


def _finish_device(d: Dict[str, Any]) -> Optional[OpenClDevice]:
    # A line repeated or cut off can leave a stub; a device needs a name, or a type plus some substance.
    if not d.get("name") and not (d.get("type") and len(d) >= 3):
        return None
    ext = d.pop("extensions", None)
    if ext is not None:
        exts = set(str(ext).split())
        d.setdefault("fp16", "cl_khr_fp16" in exts)
        d.setdefault("fp64", "cl_khr_fp64" in exts)
    nv_integrated = d.pop("integrated_memory_nv", None)
    if d.get("host_unified_memory") is None and nv_integrated is not None:
        d["host_unified_memory"] = nv_integrated
    d.pop("vendor_id", None)
    return _dev_from_dict(d)


def parse_clinfo(text: str) -> List[OpenClPlatform]:
    """`clinfo` full output -> platforms with devices (modern clinfo, AMD APP SDK clinfo, Beignet, NEO,
    PoCL, libmali...). Lines it does not know are skipped; the NULL-platform and ICD-loader sections
    at the end are not read."""
    text = ANSI.sub("", text)
    if "platform" not in text.lower():
        raise ParseError("clinfo output names no platform")
    old = _old_style(text)
    plats: List[Dict[str, Any]] = []
    cur_plat: Optional[Dict[str, Any]] = None
    cur_dev: Optional[Dict[str, Any]] = None
    pending: Dict[str, str] = {}  # AMD APP SDK prints "Platform Version:" before "Platform Name:"
    in_devices = False
    # name -> platforms of that name whose device list has not started, oldest first (a lookup per
    # "Platform Name" line stays O(1) however many platforms a capture lists)
    unseen: Dict[str, Deque[Dict[str, Any]]] = {}

    def first_unseen(name: str) -> Optional[Dict[str, Any]]:
        queue = unseen.get(name)
        while queue and queue[0].get("_devices_seen"):
            queue.popleft()
        return queue[0] if queue else None

    def add_platform(p: Dict[str, Any]) -> None:
        plats.append(p)
        unseen.setdefault(p["name"], deque()).append(p)

    for raw in text.splitlines():
        if re.match(r"^\s*NULL platform behavior", raw) or re.match(r"^\s*ICD loader properties", raw):
            break
        kv = _split_clinfo_line(raw)
        if kv is None:
            continue
        key, value = kv
        if key.startswith("number of platforms"):
            continue
        if key == "platform name":
            existing = first_unseen(value)
            if in_devices or existing is not None:
                # modern clinfo repeats "Platform Name" before each platform's device list
                cur_plat = existing
                if cur_plat is None:
                    cur_plat = {"name": value, "devices": []}
                    add_platform(cur_plat)
                cur_plat["_devices_seen"] = True
                in_devices = True
                cur_dev = None
                continue
            cur_plat = {"name": value, "devices": []}
            cur_plat.update(pending)
            pending = {}
            add_platform(cur_plat)
            continue
        if key in ("platform vendor", "platform version") and not in_devices and (
                cur_plat is None or (old and _PLATFORM_KEYS[key] in cur_plat)):
            pending[_PLATFORM_KEYS[key]] = value
            continue
        if key.startswith("number of devices"):
            in_devices = True
            if cur_plat is not None:
                cur_plat["_devices_seen"] = True
            cur_dev = None
            continue
        if cur_plat is None:
            continue
        if not in_devices and key in _PLATFORM_KEYS:
            cur_plat[_PLATFORM_KEYS[key]] = value
            continue
        if key in ("platform vendor", "platform version", "platform profile"):
            if not cur_plat.get("devices"):
                cur_plat.setdefault(_PLATFORM_KEYS.get(key, key), value)
            continue
        field = _DEVICE_KEYS.get(key)
        if field is None:
            continue
        # A new device starts at its first line: "Device Name" (modern) or "Device Type:" (AMD APP SDK);
        # the old format names the device last ("Name:"), so a second name also starts one.
        starts = (field == "name" and cur_dev is not None and "name" in cur_dev) or (
            old and field == "type" and cur_dev is not None and "type" in cur_dev)
        if cur_dev is None or starts:
            cur_dev = {}
            cur_plat["devices"].append(cur_dev)
        if field in cur_dev:
            continue  # the first value wins (a repeated line does not overwrite)
        if field in ("fp16", "fp64"):
            low = value.lower()
            cur_dev[field] = not ("n/a" in low or low.strip() == "no" or low.strip() == "0")
        elif field in ("host_unified_memory", "integrated_memory_nv"):
            flag = _bool(value.split()[0] if value.split() else value)
            if flag is not None:
                cur_dev[field] = flag
        elif field == "pci_bus_id":
            bus = _topology_bus_id(value)
            if bus:
                cur_dev[field] = bus
        else:
            cur_dev[field] = value
    out = []
    for p in plats:
        devs = tuple(dev for dev in (_finish_device(dict(d)) for d in p["devices"]) if dev is not None)
        out.append(OpenClPlatform(name=p.get("name"), vendor=p.get("vendor"), version=p.get("version"), devices=devs))
    if not out:
        raise ParseError("clinfo output lists no platform")
    return out


def _json_bus_id(topo: Any) -> Optional[str]:
    if topo is None:
        return None
    if isinstance(topo, dict):
        parts = []
        for names in (("pci_domain", "domain"), ("pci_bus", "bus"), ("pci_device", "device"), ("pci_function", "function")):
            v = next((topo[n] for n in names if isinstance(topo.get(n), int) and not isinstance(topo.get(n), bool)), None)
            parts.append(v)
        dom, bus, dev, fn = parts
        if bus is not None and dev is not None and fn is not None and 0 <= bus <= 255 and 0 <= dev <= 31 and 0 <= fn <= 7:
            return f"{(dom or 0) & 0xFFFF:04x}:{bus:02x}:{dev:02x}.{fn}"
        for v in topo.values():
            found = _json_bus_id(v) if isinstance(v, (str, dict)) else None
            if found:
                return found
        return None
    if isinstance(topo, str):
        return _topology_bus_id(topo)
    return None


def parse_clinfo_json(text: str) -> List[OpenClPlatform]:
    """`clinfo --json`: {"platforms": [{"CL_PLATFORM_NAME": ...}], "devices": [{"online": [...]}]}.

    clinfo 3.0.23 writes duplicate keys ("OpenC C" four times) and odd ones (" raw "); Python's json
    keeps the last duplicate, which is harmless for the keys read here."""
    doc = load_json(text, "clinfo --json output", skip_to="{")
    if not isinstance(doc, dict) or not isinstance(doc.get("platforms"), list):
        raise ParseError("clinfo --json output has no `platforms` list")
    raw_per_plat = doc.get("devices")
    devs_per_plat: List[Any] = raw_per_plat if isinstance(raw_per_plat, list) else []
    out = []
    for i, p in enumerate(doc["platforms"]):
        if not isinstance(p, dict):
            continue
        devs = []
        entry = devs_per_plat[i] if i < len(devs_per_plat) else {}
        online = entry.get("online", []) if isinstance(entry, dict) else []
        for d in online if isinstance(online, list) else []:
            if not isinstance(d, dict):
                continue
            ext_raw = d.get("CL_DEVICE_EXTENSIONS")
            exts = set(ext_raw.split()) if isinstance(ext_raw, str) else set()
            t = d.get("CL_DEVICE_TYPE")
            if isinstance(t, dict):
                t = t.get("type") or t.get("raw")
            topo = d.get("CL_DEVICE_TOPOLOGY_AMD") or d.get("CL_DEVICE_PCI_BUS_INFO_KHR") or d.get("CL_DEVICE_TOPOLOGY_NV")
            fields = {
                "name": d.get("CL_DEVICE_NAME"), "type": t, "vendor": d.get("CL_DEVICE_VENDOR"),
                "driver_version": d.get("CL_DRIVER_VERSION"), "version": d.get("CL_DEVICE_VERSION"),
                "opencl_c_version": d.get("CL_DEVICE_OPENCL_C_VERSION"),
                "compute_units": d.get("CL_DEVICE_MAX_COMPUTE_UNITS"),
                "global_memory_bytes": d.get("CL_DEVICE_GLOBAL_MEM_SIZE"),
                "fp16": ("cl_khr_fp16" in exts) if isinstance(ext_raw, str) else None,
                "fp64": ("cl_khr_fp64" in exts) if isinstance(ext_raw, str) else None,
                "board_name": d.get("CL_DEVICE_BOARD_NAME_AMD"),
                "pci_bus_id": _json_bus_id(topo),
                "host_unified_memory": d.get("CL_DEVICE_HOST_UNIFIED_MEMORY"),
                "compute_capability": (d.get("CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV"),
                                       d.get("CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV")),
            }
            if not _str(fields["name"]) and not _norm_type(t):
                continue
            devs.append(_dev_from_dict(fields))
        out.append(OpenClPlatform(
            name=_str(p.get("CL_PLATFORM_NAME")), vendor=_str(p.get("CL_PLATFORM_VENDOR")),
            version=_str(p.get("CL_PLATFORM_VERSION")), devices=tuple(devs)))
    return out


def is_gpu_device(dev: OpenClDevice) -> bool:
    """Only a device that says it is a GPU: a PoCL or vendor CPU device, an FPGA or an unknown type is not."""
    return dev.type == "GPU"


def gpu_from_device(dev: OpenClDevice, platform: OpenClPlatform) -> GpuFacts:
    vendor = vendor_from_text(dev.vendor) or vendor_from_text(platform.vendor) or vendor_from_text(dev.name) or "unknown"
    name = dev.board_name or dev.name
    gfx = None
    if vendor == "amd" and dev.name:
        # AMD's OpenCL (APP SDK on GCN, ROCm/ROCclr, Adrenalin on Windows) names the device by its
        # gfx target ("gfx1031", "gfx90c:xnack-") and the product in `Board name`.
        m = re.match(r"^(gfx[0-9a-f]+)", dev.name.strip())
        if m:
            gfx = m.group(1)
    if vendor == "amd" and not dev.board_name and gfx:
        name = _amd_product(gfx) or name
    pci_device_id = None
    if vendor == "intel" and dev.name:
        # Intel's NEO runtime names devices it has no marketing name for "Intel(R) Graphics [0x46d1]"
        # (and some with one: "Intel(R) UHD Graphics 630 [0x3e92]"): the PCI device id.
        m = re.search(r"\[(0x[0-9a-fA-F]{4})\]\s*$", dev.name)
        if m:
            pci_device_id = hex_id(m.group(1))
            from ..model.hw.intel import intel_gpu_info

            info = intel_gpu_info(pci_device_id)
            if info is not None and info.get("name"):
                name = str(info["name"])  # "Intel(R) Graphics [0xe20b]" -> "Intel(R) Arc(TM) B580 Graphics"
    integrated = dev.host_unified_memory
    cc, arch = dev.compute_capability, None
    if vendor == "nvidia":
        # A known NVIDIA product name always carries its compute capability (knowledge/nvidia_gpus.json).
        from ..model.hw.nvidia import architecture_for, compute_capability_for

        cc = cc or compute_capability_for(name)
        arch = architecture_for(cc)
    elif vendor == "amd" and gfx is None and dev.name:
        gfx = _amd_codename_gfx(dev.name)
    return GpuFacts(
        vendor=vendor, name=name, driver_version=dev.driver_version if vendor != "nvidia" else _nv_driver(dev),
        # An integrated GPU's "global memory" is a share of system RAM, not memory of its own.
        memory_bytes=None if integrated else dev.global_memory_bytes, integrated=integrated,
        apis=("opencl",), compute_units=dev.compute_units, compute_capability=cc,
        # AMD's OpenCL names the device by the hardware's gfx target (`Name: gfx1031`): PAL (Windows,
        # the APP SDK) knows no HSA_OVERRIDE_GFX_VERSION, and where ROCm's OpenCL runs under one the
        # rocm probe's own reading comes first in the merge.
        gfx_target=gfx, runtime_gfx_target=gfx, pci_bus_id=dev.pci_bus_id, pci_device_id=pci_device_id,
        architecture=(arch if vendor != "amd" else _amd_arch(gfx)) or _intel_generation(vendor, pci_device_id),
        sources=("opencl",),
    )


def _intel_generation(vendor: str, pci_device_id: Optional[str]) -> Optional[str]:
    if vendor != "intel" or not pci_device_id:
        return None
    from ..model.hw.intel import intel_gpu_info

    info = intel_gpu_info(pci_device_id)
    return str(info["generation"]) if info and info.get("generation") else None


def _amd_arch(gfx: Optional[str]) -> Optional[str]:
    """'gfx1031' -> 'RDNA2' (knowledge/amd_arch.json)."""
    if not gfx:
        return None
    from ..model import knowledge as kb

    return next((str(r["architecture"]) for r in kb.rows("amd_arch") if r.get("gfx_target") == gfx
                 and isinstance(r.get("architecture"), str)), None)


def _amd_product(gfx: str) -> Optional[str]:
    """A product name for a bare gfx target (no `Board name`): the one name amd_gfx.json gives it,
    when only one product has that target."""
    from ..model import knowledge as kb

    names = {str(r.get("name")) for r in kb.rows("amd_gfx") if r.get("gfx_target") == gfx and r.get("name")}
    return names.pop() if len(names) == 1 else None


def _amd_codename_gfx(name: str) -> Optional[str]:
    """AMD's pre-ROCm OpenCL (APP SDK/Catalyst/Adrenalin PAL) names GCN devices by chip codename
    ("Tonga", "Ellesmere", "Spectre"): the gfx target from knowledge/amd_opencl_names.json."""
    from ..model import knowledge as kb

    key = name.strip().lower()
    for row in kb.rows("amd_opencl_names"):
        if str(row.get("name", "")).lower() == key:
            return str(row["gfx_target"])
    return None


def _nv_driver(dev: OpenClDevice) -> Optional[str]:
    # NVIDIA's OpenCL driver_version is the display driver version ("535.104.05").
    return dev.driver_version


_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(.*\)\s+=>\s+\S")


def unregistered_icds(host: Host) -> Optional[Tuple[str, ...]]:
    """The vendor ICD libraries (knowledge/opencl_loaders.json vendor_icds) that `ldconfig -p` lists and
    no ICD entry of opencl-icd.json names (the vendors folder's .icd files, OCL_ICD_FILENAMES); None
    when either capture is missing or there is none. What clinfo lists is not changed by it."""
    from ..model import knowledge as kb

    if host.kind == "live":
        return _live_unregistered_icds(host)
    icd, ld = host.get("opencl-icd.json"), host.get("ldconfig-p.txt")
    if not icd.ok or not ld.ok:
        return None
    try:
        doc = load_json(icd.text(), "opencl-icd.json")
    except ParseError:
        return None
    if not isinstance(doc, dict):
        return None

    def stem(lib: str) -> str:
        return lib.rsplit("/", 1)[-1].split(".so")[0]

    named = {stem(str(r.get("library") or "")) for key in ("icd_files", "filenames")
             for r in (doc.get(key) or []) if isinstance(r, dict)}
    named |= {stem(n) for n in str(doc.get("OCL_ICD_FILENAMES") or "").split(":") if n.strip()}
    cached = {m.group(1) for m in map(_LDCONFIG_LINE.match, ld.text().splitlines()) if m}
    out = tuple(str(r["library"]) for r in kb.rows("opencl_loaders", "vendor_icds")
                if r.get("library") and str(r["library"]) in cached and stem(str(r["library"])) not in named)
    return out or None


def _icd_stem(lib: str) -> str:
    return lib.rsplit("/", 1)[-1].split(".so")[0]


def _live_unregistered_icds(host: Host) -> Optional[Tuple[str, ...]]:
    """The same as unregistered_icds, read in this process without a subprocess (a scan spawns none
    for this): the vendors folder's .icd files, OCL_ICD_FILENAMES, and the library's name in the
    dynamic linker's cache file (/etc/ld.so.cache) or a folder of LD_LIBRARY_PATH."""
    import os

    from ..model import knowledge as kb

    vendors = host.env("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
    named = {_icd_stem(n) for n in (host.env("OCL_ICD_FILENAMES") or "").split(":") if n.strip()}
    try:
        files = [os.path.join(vendors, n) for n in os.listdir(vendors) if n.endswith(".icd")] \
            if os.path.isdir(vendors) else ([vendors] if os.path.isfile(vendors) else [])
        for f in files:
            with open(f, "r", errors="replace") as fh:
                named.add(_icd_stem(fh.read(4096).strip()))
        with open("/etc/ld.so.cache", "rb") as fh:
            cache = fh.read(64 << 20)
    except OSError:
        return None
    dirs = [d for d in (host.env("LD_LIBRARY_PATH") or "").split(":") if d]
    out = tuple(lib for lib in (str(r.get("library") or "") for r in kb.rows("opencl_loaders", "vendor_icds"))
                if lib and _icd_stem(lib) not in named
                and ((lib.encode() + b"\0") in cache or any(os.path.exists(os.path.join(d, lib)) for d in dirs)))
    return out or None


def probe(host: Host) -> Contribution:
    out = Contribution()
    errors: List[str] = []
    candidates: List[Tuple[str, Callable[[str], List[OpenClPlatform]]]] = [
        ("mlprobe-opencl.json", parse_mlprobe_json),
        ("clinfo.json", parse_clinfo_json),
        ("clinfo.txt", parse_clinfo),
    ]
    if host.kind == "live":
        candidates = candidates[:1]  # live: pyopencl only (clinfo would just repeat it, at a subprocess's cost)
    platforms = first_parsed(host, candidates, errors)
    if platforms is None:
        nothing_read(out, errors, "no OpenCL (pyopencl not installed or no platform)")
        if any(host.get(name).status == "timeout" for name, _ in candidates):
            out.status = "timeout"
        return out
    # only where no platform lists a GPU (the case it explains): a live scan elsewhere reads no more
    unregistered = None if any(is_gpu_device(d) for p in platforms for d in p.devices) else unregistered_icds(host)
    out.runtimes = Runtimes(opencl=OpenClRuntime.of(platforms=tuple(platforms), unregistered_icds=unregistered)
                            if unregistered else OpenClRuntime.of(platforms=tuple(platforms)))
    for p in platforms:
        for d in p.devices:
            if is_gpu_device(d):
                out.gpus.append(gpu_from_device(d, p))
            elif d.type == "CPU" and d.name and not out.cpu_hints:
                out.cpu_hints.append(CpuFacts(model=cpu_model_of(d.name), source="OpenCL CPU device"))
    return out


def cpu_model_of(device_name: str) -> str:
    """An OpenCL CPU device's name as the CPU's model: PoCL prefixes its driver and LLVM's CPU name
    ("pthread-Intel(R) Xeon(R) ...", "cpu-haswell-Intel(R) Core(TM) Ultra 7 256V"); Intel's and
    AMD's runtimes print the brand string itself."""
    name = " ".join(device_name.split())
    return re.sub(r"^(?:pthread|cpu)-(?:[a-z0-9_.-]*?-)?(?=[A-Z])", "", name) or name


__all__ = [
    "probe", "parse_clinfo", "parse_clinfo_json", "parse_mlprobe_json", "vendor_from_pci",
    "gpu_from_device", "is_gpu_device",
]
