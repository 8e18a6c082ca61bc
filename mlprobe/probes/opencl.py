"""OpenCL: live through pyopencl in a child process; in replay from mlprobe-opencl.json,
clinfo.json or clinfo.txt. A CPU device (PoCL) is not a GPU; a GPU device becomes a `gpus` entry."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

from ..capture import CaptureSpec
from ..errors import ParseError
from ..facts import Contribution, GpuFacts, OpenClDevice, OpenClPlatform
from ..host import Capture, Host
from ..vendors import vendor_from_pci, vendor_from_text

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opencl_child.py")


def live_capture(host: Any, s: CaptureSpec) -> Capture:
    """Enumerate through pyopencl in a child process, so a hanging driver costs one probe."""
    from .. import _early
    from ..host import _kill_tree

    proc0 = _early.take()
    try:
        if proc0 is None:
            proc0 = _early.spawn()
        try:
            stdout, stderr = proc0.communicate(timeout=s.timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc0)
            try:
                proc0.communicate(timeout=2)
            except (subprocess.TimeoutExpired, ValueError, OSError):
                pass
            return Capture(s.name, "timeout", error=f"OpenCL enumeration did not finish within {s.timeout:g} s")
    except OSError as exc:
        return Capture(s.name, "error", error=f"could not start the OpenCL child: {exc}")
    returncode = proc0.returncode
    proc = subprocess.CompletedProcess([CHILD], returncode, stdout, stderr)
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        return Capture(s.name, "error", error=f"OpenCL child exited with status {proc.returncode}: {tail[0]}")
    try:
        doc = json.loads(proc.stdout.decode(errors="replace"))
    except ValueError:
        return Capture(s.name, "error", error="OpenCL child printed no JSON")
    if doc.get("absent"):
        return Capture(s.name, "absent", error=doc.get("error"))
    return Capture(s.name, "ok", data=proc.stdout)


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


def _dev_from_dict(d: Dict[str, Any]) -> OpenClDevice:
    return OpenClDevice(
        name=d.get("name"), type=_norm_type(d.get("type")), vendor=d.get("vendor"),
        driver_version=d.get("driver_version"), version=d.get("version"),
        opencl_c_version=d.get("opencl_c_version"), compute_units=_to_int(d.get("compute_units")),
        global_memory_bytes=_to_int(d.get("global_memory_bytes")), fp16=d.get("fp16"), fp64=d.get("fp64"),
        board_name=d.get("board_name"), pci_bus_id=d.get("pci_bus_id"),
    )


def _norm_type(t: Any) -> Optional[str]:
    if not t:
        return None
    s = str(t).upper().replace("CL_DEVICE_TYPE_", "")
    for kind in ("GPU", "CPU", "ACCELERATOR", "CUSTOM"):
        if kind in s:
            return kind
    return s.strip() or None


def parse_mlprobe_json(text: str) -> List[OpenClPlatform]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"mlprobe-opencl.json is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("platforms"), list):
        raise ParseError("mlprobe-opencl.json has no `platforms` list")
    out = []
    for p in doc["platforms"]:
        if not isinstance(p, dict):
            continue
        devs = tuple(_dev_from_dict(d) for d in p.get("devices", []) if isinstance(d, dict))
        out.append(OpenClPlatform(name=p.get("name"), vendor=p.get("vendor"), version=p.get("version"), devices=devs))
    return out


# clinfo (full) key -> field. Both the modern `clinfo` (oclgrind/Oblomov) and the older
# AMD APP SDK clinfo ("Name:", "Board name:") spellings.
_PLATFORM_KEYS = {"platform name": "name", "platform vendor": "vendor", "platform version": "version"}
_DEVICE_KEYS = {
    "device name": "name", "name": "name", "device type": "type", "device vendor": "vendor",
    "vendor": "vendor", "device vendor id": "vendor_id", "vendor id": "vendor_id",
    "driver version": "driver_version", "device version": "version", "version": "version",
    "device opencl c version": "opencl_c_version", "opencl c version": "opencl_c_version",
    "max compute units": "compute_units", "global memory size": "global_memory_bytes",
    "device board name (amd)": "board_name", "board name": "board_name",
    "device topology (amd)": "pci_bus_id", "device pci bus info (khr)": "pci_bus_id",
    "half-precision floating-point support": "fp16", "double-precision floating-point support": "fp64",
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


def parse_clinfo(text: str) -> List[OpenClPlatform]:
    """`clinfo` full output -> platforms with devices."""
    if "platform" not in text.lower():
        raise ParseError("clinfo output names no platform")
    plats: List[Dict[str, Any]] = []
    cur_plat: Optional[Dict[str, Any]] = None
    cur_dev: Optional[Dict[str, Any]] = None
    in_devices = False
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
            existing = [p for p in plats if p.get("name") == value and not p.get("_devices_seen")]
            if in_devices or existing:
                # modern clinfo repeats "Platform Name" before each platform's device list
                cur_plat = existing[0] if existing else None
                if cur_plat is None:
                    cur_plat = {"name": value, "devices": []}
                    plats.append(cur_plat)
                cur_plat["_devices_seen"] = True
                in_devices = True
                cur_dev = None
                continue
            cur_plat = {"name": value, "devices": []}
            plats.append(cur_plat)
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
        if field in ("name",) and (cur_dev is None or "name" in cur_dev):
            if key == "name" and cur_dev is not None and "name" not in cur_dev:
                pass
            else:
                cur_dev = {}
                cur_plat["devices"].append(cur_dev)
        if field == "type" and cur_dev is not None and "type" in cur_dev:
            cur_dev = {}
            cur_plat["devices"].append(cur_dev)
        if cur_dev is None:
            cur_dev = {}
            cur_plat["devices"].append(cur_dev)
        if field in ("fp16", "fp64"):
            cur_dev[field] = "n/a" not in value.lower() and "no" != value.lower().strip()
        elif field == "pci_bus_id":
            from ..vendors import normalise_bus_id

            cur_dev[field] = normalise_bus_id(value)
        elif field not in cur_dev:
            cur_dev[field] = value
    out = []
    for p in plats:
        devs = tuple(_dev_from_dict(d) for d in p["devices"] if d.get("name") or d.get("type"))
        out.append(OpenClPlatform(name=p.get("name"), vendor=p.get("vendor"), version=p.get("version"), devices=devs))
    if not out:
        raise ParseError("clinfo output lists no platform")
    return out


def parse_clinfo_json(text: str) -> List[OpenClPlatform]:
    """`clinfo --json`: {"platforms": [{"CL_PLATFORM_NAME": ...}], "devices": [{"online": [...]}]}."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"clinfo --json output is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("platforms"), list):
        raise ParseError("clinfo --json output has no `platforms` list")
    devs_per_plat = doc.get("devices") if isinstance(doc.get("devices"), list) else []
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
            ext = str(d.get("CL_DEVICE_EXTENSIONS", ""))
            t = d.get("CL_DEVICE_TYPE")
            if isinstance(t, dict):
                t = t.get("type") or t.get("raw")
            if isinstance(t, list):
                t = " ".join(str(x) for x in t)
            topo = d.get("CL_DEVICE_TOPOLOGY_AMD") or d.get("CL_DEVICE_PCI_BUS_INFO_KHR")
            from ..vendors import normalise_bus_id

            devs.append(_dev_from_dict({
                "name": d.get("CL_DEVICE_NAME"), "type": t, "vendor": d.get("CL_DEVICE_VENDOR"),
                "driver_version": d.get("CL_DRIVER_VERSION"), "version": d.get("CL_DEVICE_VERSION"),
                "opencl_c_version": d.get("CL_DEVICE_OPENCL_C_VERSION"),
                "compute_units": d.get("CL_DEVICE_MAX_COMPUTE_UNITS"),
                "global_memory_bytes": d.get("CL_DEVICE_GLOBAL_MEM_SIZE"),
                "fp16": "cl_khr_fp16" in ext, "fp64": "cl_khr_fp64" in ext,
                "board_name": d.get("CL_DEVICE_BOARD_NAME_AMD"),
                "pci_bus_id": normalise_bus_id(str(topo)) if topo else None,
            }))
        out.append(OpenClPlatform(
            name=p.get("CL_PLATFORM_NAME"), vendor=p.get("CL_PLATFORM_VENDOR"),
            version=p.get("CL_PLATFORM_VERSION"), devices=tuple(devs)))
    return out


def gpu_from_device(dev: OpenClDevice, platform: OpenClPlatform) -> GpuFacts:
    vendor = vendor_from_text(dev.vendor) or vendor_from_text(platform.vendor) or vendor_from_text(dev.name) or "unknown"
    name = dev.board_name or dev.name
    gfx = None
    if vendor == "amd" and dev.name:
        m = re.match(r"^(gfx[0-9a-f]+)", dev.name.strip())
        if m:
            gfx = m.group(1)
    return GpuFacts(
        vendor=vendor, name=name, driver_version=dev.driver_version if vendor != "nvidia" else _nv_driver(dev),
        memory_bytes=dev.global_memory_bytes, apis=("opencl",), compute_units=dev.compute_units,
        runtime_gfx_target=gfx, pci_bus_id=dev.pci_bus_id, sources=("opencl",),
    )


def _nv_driver(dev: OpenClDevice) -> Optional[str]:
    # NVIDIA's OpenCL driver_version is the display driver version ("535.104.05").
    return dev.driver_version


def probe(host: Host) -> Contribution:
    out = Contribution()
    platforms: Optional[List[OpenClPlatform]] = None
    errors: List[str] = []
    for name, parser in (
        ("mlprobe-opencl.json", parse_mlprobe_json),
        ("clinfo.json", parse_clinfo_json),
        ("clinfo.txt", parse_clinfo),
    ):
        if host.kind == "live" and name != "mlprobe-opencl.json":
            break  # live: pyopencl only (clinfo would just repeat it, at a subprocess's cost)
        cap = host.get(name)
        if not cap.ok:
            if cap.status in ("error", "timeout"):
                errors.append(cap.error or f"{name}: {cap.status}")
                if cap.status == "timeout":
                    out.status = "timeout"
            continue
        try:
            platforms = parser(cap.text())
            break
        except ParseError as exc:
            errors.append(f"{name}: {exc}")
    if platforms is None:
        if out.status != "timeout":
            out.status = "error" if errors else "absent"
        out.error = "; ".join(errors) or "no OpenCL (pyopencl not installed or no platform)"
        return out
    out.runtimes["opencl"] = {"platforms": [p.to_dict() for p in platforms]}
    for p in platforms:
        for d in p.devices:
            if d.type == "GPU" or (d.type is None and vendor_from_text(d.vendor) in ("nvidia", "amd")):
                out.gpus.append(gpu_from_device(d, p))
    return out


__all__ = ["probe", "parse_clinfo", "parse_clinfo_json", "parse_mlprobe_json", "live_capture", "vendor_from_pci"]
