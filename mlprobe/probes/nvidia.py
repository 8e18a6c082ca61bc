"""NVIDIA GPUs through nvidia-smi (XML, `-q` text, CSV query, plain table) and
/proc/driver/nvidia/version.

Every `parse_*` function is pure and returns an `SmiReport` (driver, CUDA version, GPUs as that one
output shows them). The probe reads the captures in priority order (XML > `-q` > CSV > table):
the first output that lists GPUs defines the device set; later ones only fill fields of the same
devices, so a damaged or truncated capture never adds a GPU. MIG instances are counted on their
parent GPU (`mig_devices`), never reported as GPUs.

Knowledge (name -> compute capability, compute capability -> architecture, driver -> CUDA version)
lives in mlprobe/knowledge/nvidia_gpus.json with a source on every row.
"""

from __future__ import annotations

import csv
from collections import Counter
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ParseError
from ..model.facts import Contribution, CudaRuntime, GpuFacts, MigDevice, Runtimes
from ..scan.capture import Host
from ..model.vendors import normalise_bus_id
from ..model.hw.nvidia import (architecture_for, compute_capability_for, compute_capability_for_architecture,
                               compute_capability_for_name_prefix, compute_capability_for_truncated,
                               cuda_for_driver, integrated_for)
from ._util import clean_text, nothing_read, parse_capture
from .nvidia_topo import with_topology
from .nvidia_data import (NvGpu as NvGpu, SmiReport as SmiReport, _cuda_version, _dedupe, _merge_gpu, _mib,
                          _mig_mode, _name, _pci_ids, _serial, _uuid, _value, _version)

SOURCE = "nvidia"
MIB = 1024 * 1024
# nvidia-smi -q -x of an 8-GPU node is ~400 KiB; anything this large is not nvidia-smi output.
MAX_XML_CHARS = 16 * 1024 * 1024

_BUS = re.compile(r"[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")


# -- nvidia-smi -q -x -------------------------------------------------------------------------------


def _partial_xml_root(text: str) -> Optional[ET.Element]:
    """The tree as far as it parses: truncated or damaged XML still yields its first GPUs."""
    parser: "ET.XMLPullParser[Any]" = ET.XMLPullParser(events=("start",))
    try:
        parser.feed(text)
        parser.close()
    except ET.ParseError:
        pass
    events = parser.read_events()
    while True:
        try:
            item: Any = next(events)
        except (StopIteration, ET.ParseError):
            return None
        elem = item[1]
        if isinstance(elem, ET.Element):
            return elem  # the first start event is the root; the tree hangs off it


def _xtext(elem: Optional[ET.Element], path: str) -> Optional[str]:
    if elem is None:
        return None
    found = elem.find(path)
    if found is None or found.text is None:
        return None
    return found.text


def parse_smi_xml(text: str) -> SmiReport:
    """`nvidia-smi -q -x` (DTD v10-v13 and later: only element names are read, never the DTD)."""
    text = clean_text(text[:MAX_XML_CHARS])
    start = text.find("<nvidia_smi_log")
    if start < 0:
        raise ParseError("no <nvidia_smi_log> element: not nvidia-smi -q -x output")
    # From the root element on: drops a prompt line, the XML declaration and the DOCTYPE (an
    # external DTD is never fetched; an internal subset could declare entities, so it goes too).
    body = text[start:]
    if "<!ENTITY" in text.upper():
        raise ParseError("nvidia-smi XML with entity declarations refused")
    root = _partial_xml_root(body)
    if root is None or root.tag != "nvidia_smi_log":
        raise ParseError("nvidia-smi XML could not be read")
    rep = SmiReport(
        driver_version=_version(_xtext(root, "driver_version")) or _version(_xtext(root, "kmd_version")),
        cuda_version=_cuda_version(_xtext(root, "cuda_version"))
        or _cuda_version(_xtext(root, "cuda_umd_version")),
    )
    for index, g in enumerate(root.findall("gpu")):
        name, truncated = _name(_xtext(g, "product_name"))
        dev, ven = _pci_ids(_xtext(g, "pci/pci_device_id"))
        mig_parent = g.find("mig_devices")
        rep.gpus.append(
            NvGpu(
                index=_int(_xtext(g, "minor_number")) if _xtext(g, "minor_number") else index,
                name=name,
                name_truncated=truncated,
                uuid=_uuid(_xtext(g, "uuid")),
                pci_bus_id=normalise_bus_id(_value(_xtext(g, "pci/pci_bus_id")) or g.get("id")),
                pci_device_id=dev,
                pci_vendor_id=ven,
                serial=_serial(_xtext(g, "serial")),
                # the GPU's own fb_memory_usage (MIG slices have theirs inside <mig_devices>)
                memory_mib=_mib(_xtext(g, "fb_memory_usage/total")),
                compute_capability=_cc(_xtext(g, "compute_cap")),
                architecture=_value(_xtext(g, "product_architecture")),
                mig_mode=_mig_mode(_xtext(g, "mig_mode/current_mig")),
                mig_devices=len(mig_parent.findall("mig_device")) if mig_parent is not None else 0,
                driver_model=_value(_xtext(g, "driver_model/current_dm")),
            )
        )
    rep.gpus = _dedupe(rep.gpus)
    return rep


def _int(raw: Optional[str]) -> Optional[int]:
    v = _value(raw)
    return int(v) if v is not None and v.isdigit() else None


def _cc(raw: Optional[str]) -> Optional[str]:
    v = _value(raw)
    if v is None:
        return None
    m = re.fullmatch(r"(\d{1,2})\.(\d)", v)
    return f"{int(m.group(1))}.{m.group(2)}" if m else None


# -- nvidia-smi -q (text) ------------------------------------------------------------------------------


_Q_KV = re.compile(r"^(\s*)(\S.*?)\s+:\s?(.*)$")
_Q_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def parse_smi_q(text: str) -> SmiReport:
    """`nvidia-smi -q`: `Key : value` lines nested by 4-space indentation under `GPU <bus id>`."""
    text = clean_text(text).expandtabs(8)
    if "NVSMI LOG" not in text and not re.search(r"^GPU [0-9A-Fa-f]+:", text, re.M):
        raise ParseError("no '==NVSMI LOG==' header and no 'GPU <bus id>' section: not nvidia-smi -q output")
    rep = SmiReport()
    top: Dict[str, str] = {}
    gpu_values: List[Dict[Tuple[str, ...], str]] = []
    gpu_bus: List[str] = []
    mig_counts: List[int] = []
    stack: List[Tuple[int, str]] = []  # (indent, section name) inside the current GPU
    current: Optional[Dict[Tuple[str, ...], str]] = None
    for line in text.split("\n"):
        if not line.strip():
            continue
        m = _Q_GPU.match(line)
        if m:
            current = {}
            gpu_values.append(current)
            gpu_bus.append(m.group(1))
            mig_counts.append(0)
            stack = []
            continue
        indent = len(line) - len(line.lstrip(" "))
        kv = _Q_KV.match(line)
        if current is None:
            if kv and indent == 0:
                top.setdefault(kv.group(2).strip(), kv.group(3))
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = tuple(s for _, s in stack)
        if kv:
            current.setdefault(path + (kv.group(2).strip(),), kv.group(3))
        else:
            section = line.strip()
            if section == "MIG Device" and not path:
                mig_counts[-1] += 1
            stack.append((indent, section))
    rep.driver_version = _version(top.get("Driver Version")) or _version(top.get("KMD Version"))
    rep.cuda_version = _cuda_version(top.get("CUDA Version")) or _cuda_version(top.get("CUDA UMD Version"))
    for index, (vals, bus, migs) in enumerate(zip(gpu_values, gpu_bus, mig_counts)):
        name, truncated = _name(vals.get(("Product Name",)))
        dev, ven = _pci_ids(vals.get(("PCI", "Device Id")))
        rep.gpus.append(
            NvGpu(
                index=_int(vals.get(("Minor Number",))) if vals.get(("Minor Number",)) else index,
                name=name,
                name_truncated=truncated,
                uuid=_uuid(vals.get(("GPU UUID",))),
                pci_bus_id=normalise_bus_id(_value(vals.get(("PCI", "Bus Id"))) or bus),
                pci_device_id=dev,
                pci_vendor_id=ven,
                serial=_serial(vals.get(("Serial Number",))),
                memory_mib=_mib(vals.get(("FB Memory Usage", "Total"))),
                architecture=_value(vals.get(("Product Architecture",))),
                mig_mode=_mig_mode(vals.get(("MIG Mode", "Current"))),
                mig_devices=migs,
                driver_model=_value(vals.get(("Driver Model", "Current"))),
            )
        )
    rep.gpus = _dedupe(rep.gpus)
    return rep


# -- nvidia-smi --query-gpu=... --format=csv ------------------------------------------------------------

# CAPTURES.md's column order, for output taken with `noheader`.
QUERY_COLUMNS = ("name", "driver_version", "compute_cap", "memory.total", "pci.bus_id", "uuid")


def parse_smi_query_csv(text: str) -> SmiReport:
    """CSV from `nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`; the header
    (when present) says which fields were asked for, in which order."""
    text = clean_text(text)
    rows = [[c.strip() for c in row] for row in csv.reader(line for line in text.split("\n") if line.strip())]
    columns: Optional[List[str]] = None
    body: List[List[str]] = []
    known = ("name", "pci.bus_id", "uuid", "driver_version", "index", "compute_cap", "memory.total")

    def score(keys: List[str]) -> int:
        return sum(k in known for k in keys)

    for row in rows:
        keys = [re.sub(r"\s*\[.*?\]\s*$", "", c).strip().lower() for c in row]
        if score(keys) >= 2 or (columns is None and score(keys) >= 1):
            # A header line is never a GPU. A repeated header (a doubled line, two outputs pasted
            # together) is skipped; a cleaner one than a damaged first header replaces it.
            if columns is None:
                body.clear()  # what came before the first header (a pasted prompt line) is no GPU
            if columns is None or score(keys) > score(columns):
                columns = keys
            continue
        body.append(row)
    if columns is None:
        if any(len(r) == len(QUERY_COLUMNS) for r in body):
            columns = list(QUERY_COLUMNS)
        else:
            raise ParseError("no CSV header naming nvidia-smi query fields")
    rep = SmiReport()
    kept: List[List[str]] = []
    for row in body:
        if len(row) != len(columns):
            continue  # truncated or damaged
        # Repeated by a paste, whole or with fields cut off: every field it has equals an earlier row's.
        if any(all(c == "" or c == prev[i] for i, c in enumerate(row)) for prev in kept):
            continue
        kept.append(row)
        rec = dict(zip(columns, row))
        name, truncated = _name(rec.get("name"))
        if name is None and not rec.get("pci.bus_id") and not rec.get("uuid"):
            continue
        bus = normalise_bus_id(_value(rec.get("pci.bus_id")))
        uuid = _uuid(rec.get("uuid"))
        index = _int(rec.get("index"))
        # One GPU per bus id and per UUID: a pasted row repeated with one field damaged is the
        # same device, not a second one.
        if any((bus and g.pci_bus_id == bus) or (uuid and g.uuid == uuid) for g in rep.gpus):
            continue
        if bus is None and uuid is None and index is None:
            index = len(rep.gpus)
        rep.driver_version = rep.driver_version or _version(rec.get("driver_version"))
        dev, ven = _pci_ids(rec.get("pci.device_id"))
        rep.gpus.append(
            NvGpu(
                index=index,
                name=name,
                name_truncated=truncated,
                uuid=uuid,
                pci_bus_id=bus,
                pci_device_id=dev,
                pci_vendor_id=ven,
                serial=_serial(rec.get("serial")),
                memory_mib=_mib(rec.get("memory.total")),
                compute_capability=_cc(rec.get("compute_cap")),
                mig_mode=_mig_mode(rec.get("mig.mode.current")),
                driver_model=_value(rec.get("driver_model.current")),
            )
        )
    rep.gpus = _dedupe(rep.gpus)
    return rep


# -- nvidia-smi (plain table) ------------------------------------------------------------------------------

_TABLE_SMI = re.compile(r"NVIDIA-SMI\s+(\d+(?:\.\d+)+)")
_TABLE_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(\d+(?:\.\d+)+)")
_TABLE_CUDA = re.compile(r"CUDA(?: UMD)? Version:\s*(\d+\.\d+)")
_ROW_HEAD = re.compile(r"^\s*(\d{1,3})\s+(.*?)\s+(On|Off|WDDM|TCC|MCDM|N/A)\s*$")
_ROW_HEAD_LOOSE = re.compile(r"^\s*(\d{1,3})\s+(\S.*?)\s*$")
_MEM_CELL = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_NA_CELL = re.compile(r"^\s*N/A\s+N/A\s*$")
_NVGPU_NAME = re.compile(r"\(nvgpu\)\s*$")
_MIG_ROW = re.compile(r"^\|\s*(\d{1,3})\s+(\d{1,3})\s+(\d{1,3})\s+(\d{1,3})\s*\|")
_FAILURES = (
    "couldn't communicate with the nvidia driver",
    "no devices were found",
    "failed to initialize nvml",
)


def parse_smi_table(text: str) -> SmiReport:
    """The plain `nvidia-smi` table (2015-2026 layouts, Linux and Windows)."""
    text = clean_text(text)
    low = text.lower()
    rep = SmiReport()
    for msg in _FAILURES:
        if msg in low:
            rep.notes.append(f"nvidia-smi reported: {msg}")
    if "nvidia-smi" not in low and not rep.notes and not _BUS.search(text):
        raise ParseError("no 'NVIDIA-SMI' header and no GPU row: not nvidia-smi table output")
    m = _TABLE_DRIVER.search(text)
    rep.driver_version = m.group(1) if m else None
    m = _TABLE_CUDA.search(text)
    rep.cuda_version = _cuda_version(m.group(1)) if m else None
    m = _TABLE_SMI.search(text)
    rep.smi_version = m.group(1) if m else None
    lines = text.split("\n")
    in_mig = False
    mig_seen: Dict[int, set[Tuple[str, ...]]] = {}
    last: Optional[NvGpu] = None
    for line in lines:
        stripped = line.strip()
        if "MIG devices:" in line:
            in_mig, last = True, None
            continue
        if "Processes:" in line:
            in_mig, last = False, None
            continue
        if in_mig:
            mm = _MIG_ROW.match(stripped)
            if mm:
                mig_seen.setdefault(int(mm.group(1)), set()).add(mm.groups())
            continue
        if not stripped.startswith("|"):
            continue
        cells = stripped.strip("|").split("|")
        if len(cells) < 2:
            continue
        bus_match = _BUS.search(cells[1])
        # Jetson (JetPack 6): the integrated GPU has no PCI bus id; its row reads `0  Orin (nvgpu)  N/A | N/A  N/A |`
        tegra = None if bus_match else _ROW_HEAD.match(cells[0]) if _NA_CELL.match(cells[1]) else None
        if bus_match or tegra:
            head = tegra or _ROW_HEAD.match(cells[0]) or _ROW_HEAD_LOOSE.match(cells[0])
            if not head or (tegra and not _NVGPU_NAME.search(head.group(2))):
                continue
            name, truncated = _name(head.group(2))
            model = head.group(3) if head.re is _ROW_HEAD else None
            last = NvGpu(
                index=int(head.group(1)),
                name=name,
                name_truncated=truncated,
                cut_at_word=truncated and head.group(2).rstrip().endswith(" ..."),
                pci_bus_id=normalise_bus_id(bus_match.group(0)) if bus_match else None,
                driver_model=model if model in ("WDDM", "TCC", "MCDM") else None,
            )
            rep.gpus.append(last)
            continue
        if last is None:
            continue
        mem = _MEM_CELL.search(cells[1])
        if mem and last.memory_mib is None:
            last.memory_mib = int(mem.group(2))
            continue
        if len(cells) >= 3 and last.mig_mode is None:
            mode = _mig_mode(cells[2])
            if mode is not None and cells[0].strip() == "" and cells[1].strip() == "":
                last.mig_mode = mode
    for g in rep.gpus:
        if g.index is not None and g.index in mig_seen:
            g.mig_devices = len(mig_seen[g.index])
    rep.gpus = _dedupe(rep.gpus)
    if not rep.gpus and not rep.driver_version and not rep.notes:
        raise ParseError("nvidia-smi table lists neither a driver version nor a GPU")
    return rep


# -- nvidia-smi -L ----------------------------------------------------------------------------------------

_L_GPU = re.compile(r"^\s*GPU\s+(\d+):\s*(.*?)\s*\(UUID:\s*([^)]*)\)\s*$")
_L_MIG = re.compile(r"^\s*MIG\s+(\S+)\s+Device\s+(\d+):\s*\(UUID:\s*([^)]*)\)\s*$")


def parse_smi_list(text: str) -> SmiReport:
    """`nvidia-smi -L`: `GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-…)`, and under a MIG-enabled GPU one
    `  MIG 1g.10gb     Device  0: (UUID: MIG-…)` line per MIG device. A UUID the paste hid (`[removed]`)
    is no UUID."""
    text = clean_text(text)
    rep = SmiReport()
    last: Optional[NvGpu] = None
    for line in text.split("\n"):
        m = _L_GPU.match(line)
        if m:
            uuid = m.group(3).strip()
            name, truncated = _name(m.group(2))
            last = NvGpu(index=int(m.group(1)), name=name, name_truncated=truncated,
                         uuid=uuid if uuid.upper().startswith("GPU-") else None)
            rep.gpus.append(last)
            continue
        m = _L_MIG.match(line)
        if m and last is not None:
            uuid = m.group(3).strip()
            last.mig = last.mig + ((m.group(1), int(m.group(2)), uuid if uuid.upper().startswith("MIG-") else None),)
            last.mig_devices = len(last.mig)
            last.mig_mode = "Enabled"  # MIG devices exist only in MIG mode
    if not rep.gpus:
        for msg in _FAILURES:
            if msg in text.lower():
                rep.notes.append(f"nvidia-smi reported: {msg}")
        if not rep.notes:
            raise ParseError("no `GPU N: name (UUID: …)` line: not `nvidia-smi -L` output")
    return rep


# -- /proc/driver/nvidia/version -------------------------------------------------------------------------

_NVRM = re.compile(r"NVRM version:.*?Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")


def parse_proc_driver_version(text: str) -> str:
    """ "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  ..." (proprietary) or
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build ..." (open)."""
    m = _NVRM.search(clean_text(text))
    if not m:
        raise ParseError("no 'NVRM version: ... Kernel Module <version>' line")
    return m.group(1)


def kernel_module_flavour(text: str) -> Optional[str]:
    """'open' for "NVIDIA UNIX Open Kernel Module ...", 'proprietary' for "NVIDIA UNIX x86_64 Kernel
    Module ..." (the flavour decides which GPUs the driver can drive: knowledge/nvidia_gpus.json
    `kernel_modules`); None when the line is not there."""
    m = re.search(r"NVRM version:[^\n]*?Kernel Module", clean_text(text))
    if not m:
        return None
    return "open" if re.search(r"\bOpen Kernel Module\b", m.group(0)) else "proprietary"


# -- the probe --------------------------------------------------------------------------------

_PARSERS = (
    ("nvidia-smi-q-x.xml", parse_smi_xml),
    ("nvidia-smi-q.txt", parse_smi_q),
    ("nvidia-smi-query.csv", parse_smi_query_csv),
    ("nvidia-smi.txt", parse_smi_table),
    ("nvidia-smi-L.txt", parse_smi_list),
)


def _combine(reports: List[Tuple[str, SmiReport]]) -> List[NvGpu]:
    primary: Optional[List[NvGpu]] = None
    for _source, rep in reports:
        if not rep.gpus:
            continue
        if primary is None:
            primary = list(rep.gpus)
            continue
        aligned = len(rep.gpus) == len(primary)
        for pos, g in enumerate(rep.gpus):
            match = next((i for i, p in enumerate(primary) if _identified_same(p, g)), None)
            if match is None and aligned and not _conflicts(primary[pos], g):
                match = pos
            if match is not None:
                primary[match] = _merge_gpu(primary[match], g)
    return primary or []


def _identified_same(a: NvGpu, b: NvGpu) -> bool:
    if a.pci_bus_id and b.pci_bus_id:
        return a.pci_bus_id == b.pci_bus_id
    if a.uuid and b.uuid:
        return a.uuid.lower() == b.uuid.lower()
    return False


def _conflicts(a: NvGpu, b: NvGpu) -> bool:
    return bool(
        (a.pci_bus_id and b.pci_bus_id and a.pci_bus_id != b.pci_bus_id)
        or (a.uuid and b.uuid and a.uuid.lower() != b.uuid.lower())
    )


def to_gpu_facts(g: NvGpu, driver: Optional[str]) -> GpuFacts:
    cc = g.compute_capability
    notes: List[str] = []
    if cc is None and not g.name_truncated:
        cc = compute_capability_for(g.name)
    elif cc is None and g.cut_at_word:
        cc = compute_capability_for_truncated(g.name) or compute_capability_for_name_prefix(g.name)
    elif cc is None and g.name_truncated:
        cc = compute_capability_for_name_prefix(g.name)
    if cc is None and g.architecture:
        cc = compute_capability_for_architecture(g.architecture)
    arch = g.architecture or architecture_for(cc)
    if g.name_truncated:
        notes.append("nvidia-smi's table truncated the name; capture `nvidia-smi -q -x` for the full one")
    if g.mig_mode == "Enabled":
        n = max(g.mig_devices, len(g.mig))
        profiles = ", ".join(f"{c} x {p}" for p, c in Counter(p for p, _, _ in g.mig).items())
        notes.append(f"MIG enabled with {n} instance(s){f' ({profiles})' if profiles else ''}; each is a slice "
                     "of this GPU, the device a job gets")
    return GpuFacts(
        vendor="nvidia",
        name=g.name,
        driver_version=driver,
        compute_capability=cc,
        memory_bytes=g.memory_mib * MIB if g.memory_mib is not None else None,
        integrated=integrated_for(g.name) if not g.name_truncated else False,
        apis=("cuda",),
        architecture=arch,
        pci_bus_id=g.pci_bus_id,
        pci_vendor_id=g.pci_vendor_id or "0x10de",
        pci_device_id=g.pci_device_id,
        uuid=g.uuid,
        serial=g.serial,
        mig_mode=g.mig_mode,
        mig_devices=max(g.mig_devices, len(g.mig)),
        mig=tuple(MigDevice(profile=p, index=i, uuid=u) for p, i, u in g.mig),
        sources=(SOURCE,),
        notes=tuple(notes),
    )


def probe(host: Host) -> Contribution:
    out = Contribution()
    live = host.kind == "live"
    system = host.info().get("system")
    reports: List[Tuple[str, SmiReport]] = []
    errors: List[str] = []
    smi_stop = False  # live: nvidia-smi is missing or hangs; asking again costs the same
    smi_failed = False
    timed_out = False
    for name, parser in _PARSERS:
        if smi_stop:
            break
        if live and reports and name in ("nvidia-smi-q.txt", "nvidia-smi.txt", "nvidia-smi-L.txt") and not (
                name == "nvidia-smi-L.txt" and any(g.mig_mode == "Enabled" for _, r in reports for g in r.gpus)):
            continue  # XML (plus the CSV for compute_cap) already said everything
        if live and smi_failed and name != "nvidia-smi.txt":
            continue  # after a failure only the plain table (the most tolerant output) is tried
        cap = host.get(name)
        if not cap.ok:
            if cap.status == "absent" and live and "not found" in (cap.error or ""):
                smi_stop = True  # one PATH lookup for all four nvidia-smi captures
            elif cap.status in ("error", "timeout"):
                errors.append(cap.error or f"{name}: {cap.status}")
                timed_out = timed_out or cap.status == "timeout"
                smi_stop = live and cap.status == "timeout"
                smi_failed = True
            continue
        try:
            reports.append((name, parser(cap.text())))
        except ParseError as exc:
            errors.append(f"{name}: {exc}")
    kernel_driver = parse_capture(host, "proc-driver-nvidia-version.txt", parse_proc_driver_version, errors)
    flavour = kernel_module_flavour(host.get("proc-driver-nvidia-version.txt").text()) if kernel_driver else None
    gpus = _combine(reports)
    topo_warnings: List[str] = []
    # Live, the matrix is asked for only where nvidia-smi listed GPUs; a bundle may hold it alone.
    topo_gpus, topology = ([], None) if live and not gpus else \
        with_topology(host, [GpuFacts(vendor="nvidia") for _ in gpus], topo_warnings)
    if not reports and kernel_driver is None and topology is None:
        nothing_read(out, errors, "no nvidia-smi output and no /proc/driver/nvidia/version")
        if timed_out:
            out.status = "timeout"
        return out
    driver = next((r.driver_version for _, r in reports if r.driver_version), None) or kernel_driver
    windows = system == "Windows" or any(g.driver_model in ("WDDM", "TCC", "MCDM") for g in gpus)
    smi = next((r.smi_version for _, r in reports if r.smi_version), None)
    wsl = bool(smi and driver and smi != driver)  # WSL2: the Linux nvidia-smi over the Windows driver
    cuda = next((r.cuda_version for _, r in reports if r.cuda_version), None)
    if cuda is None and not (gpus and all(_NVGPU_NAME.search(g.name or "") for g in gpus)):
        # (a Jetson's driver comes with L4T: the desktop driver -> CUDA table says nothing about it)
        cuda = cuda_for_driver(driver, "Windows" if windows or wsl else system)
    out.gpus = [to_gpu_facts(g, driver) for g in gpus]
    tcc = [i for i, g in enumerate(gpus) if g.driver_model == "TCC"]
    for i in tcc:
        # TCC (NVML's WDM) treats the GPU as a generic compute device, not a display adapter: CUDA
        # runs, DirectX does not see it, so neither DirectML nor WSL2's GPU paravirtualisation can
        # use it (knowledge/directml.json `tcc_hides_gpu_from_directx`).
        out.gpus[i] = replace(out.gpus[i], notes=out.gpus[i].notes + (
            "Windows driver model TCC: CUDA can use this GPU, DirectX (so DirectML and WSL2) cannot; "
            "`nvidia-smi -g N -dm 0` (WDDM) or `-dm 2` (MCDM), then a reboot, changes that where the "
            "card allows it",))
    if topology is not None:  # each GPU with its row of `nvidia-smi topo -m`
        out.gpus = [replace(g, topology=t.topology) for g, t in zip(out.gpus, topo_gpus)] + topo_gpus[len(out.gpus):]
    if system is None and windows:
        # A bundle without host.json: WDDM/TCC/MCDM driver models exist only on Windows.
        from ..model.facts import OsFacts

        out.os = OsFacts(system="Windows")
    runtime: Optional[CudaRuntime] = None
    if driver or cuda or topology:
        runtime = CudaRuntime.of(driver_version=driver, version=cuda)
        if flavour:
            runtime = runtime.but(kernel_module=flavour)
        if tcc:
            runtime = runtime.but(tcc_gpus=tuple(out.gpus[i].pci_bus_id or out.gpus[i].name or f"GPU {i}"
                                                 for i in tcc))
        if topology:
            runtime = runtime.but(topology=topology)
    out.warnings.extend(topo_warnings)
    for _, rep in reports:
        out.warnings.extend(rep.notes)
    if wsl and smi and driver:
        # Native Linux and Windows print one number twice; WSL2's nvidia-smi is the Linux build of the
        # tool over the Windows driver, so its own version differs from the (Windows) driver's.
        runtime = (runtime or CudaRuntime.of(driver_version=driver, version=cuda)).but(smi_version=smi)
        out.warnings.append(
            f"nvidia-smi {smi} reports the Windows driver {driver}: this is WSL2, where the GPU is the "
            "Windows driver's (keep the Windows NVIDIA driver current; install no Linux display driver)")
        if system is None and out.os is None:
            from ..model.facts import OsFacts

            out.os = OsFacts(system="Linux", wsl=True)
    if runtime is not None:
        out.runtimes = Runtimes(cuda=runtime)
    if kernel_driver and driver and kernel_driver != driver:
        out.warnings.append(
            f"the NVIDIA kernel module is {kernel_driver} but nvidia-smi reports driver "
            f"{driver}: a driver update is pending a reboot (or a container mismatch)"
        )
    if not gpus and kernel_driver and not reports:
        out.warnings.append("the NVIDIA kernel module is loaded but no nvidia-smi output was captured")
    if errors:
        out.warnings.extend(errors)
    return out


__all__ = [
    "NvGpu",
    "SmiReport",
    "architecture_for",
    "compute_capability_for",
    "cuda_for_driver",
    "integrated_for",
    "kernel_module_flavour",
    "parse_proc_driver_version",
    "parse_smi_list",
    "parse_smi_q",
    "parse_smi_query_csv",
    "parse_smi_table",
    "parse_smi_xml",
    "probe",
]
