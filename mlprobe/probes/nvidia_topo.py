"""`nvidia-smi topo -m` (also spelled `topo --matrix`): how the GPUs of one machine reach each other
(NVLink, or PCIe through a switch, the CPU or the link between CPU sockets), which CPUs and NUMA
node each GPU is close to, and which network cards sit near it.

The matrix is printed as tab-separated columns: a header row of device names (GPU0…, then NICs as
NIC0… or by their own names such as mlx5_0 on older drivers), then `CPU Affinity`, `NUMA Affinity`
and `GPU NUMA ID` (older drivers print fewer of these). One row per device follows; a cell is a link
code (X, NV#, PIX, PXB, PHB, NODE, SYS; SOC on old drivers), then the affinity values. nvidia-smi
pads some affinity cells with an extra empty cell and leaves the CPU affinity empty on some hosts,
so those values are read from the right. Pastes lose the tabs, indent the table (inside a
`collect_env` or vLLM report under "GPU Topology:"), underline the header with ANSI escapes, end
lines with CRLF or stop half-way; all of that is read.

`parse_topo_matrix` is pure; `gpu_topology` and `summary` turn its result into facts and words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import ParseError
from ..model.facts import CudaTopology, GpuFacts, GpuLink, GpuNicLink, GpuTopology
from ..scan.capture import Host
from ._util import clean_text

# The trailing columns, as the header names them (any whitespace inside).
_TRAILING = (("cpu_affinity", r"CPU\s+Affinity"), ("numa_affinity", r"NUMA\s+Affinity"),
             ("gpu_numa_id", r"GPU\s+NUMA\s+ID"))
_TRAILING_RE = [(key, re.compile(rx)) for key, rx in _TRAILING]
_GPU = re.compile(r"GPU(\d+)$")
_NV = re.compile(r"NV(\d+)$")
_PCIE = {"PIX": "pix", "PXB": "pxb", "PHB": "phb", "NODE": "node", "SYS": "sys", "SOC": "sys"}
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*$")  # GPU0, NIC3, mlx5_0
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
# More columns than this is not a machine's matrix (an NVL72 rack prints 72 GPUs + NICs per node).
MAX_COLUMNS = 1024

WORDS = {
    "pix": "over PCIe through one PCIe switch",
    "pxb": "over PCIe through several PCIe switches",
    "phb": "over PCIe through the CPU",
    "node": "over PCIe across host bridges within one NUMA node",
    "sys": "over PCIe across NUMA nodes, through the link between CPU sockets",
    "unknown": "over a link nvidia-smi did not name",
}


@dataclass
class TopoRow:
    """One device's row: its link code to every column, and its affinity cells."""

    name: str
    links: Dict[str, str] = field(default_factory=dict)  # column name -> code as printed
    cpu_affinity: Optional[str] = None
    numa_affinity: Optional[str] = None
    gpu_numa_id: Optional[str] = None


@dataclass
class TopoMatrix:
    columns: List[str] = field(default_factory=list)  # GPU0…, NICs, in header order
    rows: Dict[str, TopoRow] = field(default_factory=dict)
    nic_names: Dict[str, str] = field(default_factory=dict)  # NIC0 -> mlx5_0 (the NIC legend)
    notes: List[str] = field(default_factory=list)

    @cached_property
    def gpus(self) -> List[str]:
        return [c for c in self.columns if _GPU.match(c)]

    @cached_property
    def nics(self) -> List[str]:
        return [c for c in self.columns if not _GPU.match(c)]

    def link(self, a: str, b: str) -> Optional[str]:
        """The code between two devices, from a's row, else from b's (the matrix is symmetric)."""
        r = self.rows.get(a)
        code = r.links.get(b) if r is not None else None
        if code:
            return code
        r = self.rows.get(b)
        return (r.links.get(a) or None) if r is not None else None


@lru_cache(maxsize=512)
def link_type(code: str) -> Tuple[str, Optional[int]]:
    """("nvlink", 18) for NV18, ("phb", None) for PHB, ("sys", None) for the old SOC."""
    code = code.strip().upper()
    m = _NV.match(code)
    if m:
        return "nvlink", int(m.group(1))
    return _PCIE.get(code, "unknown"), None


def _cells(line: str) -> List[str]:
    """A row's cells. With tabs, empty cells are kept (nvidia-smi pads with them); without (a paste
    that turned tabs into spaces) every run of whitespace separates two cells."""
    line = line.strip(" \n")
    if "\t" in line:
        return [c.strip() for c in line.strip("\t").split("\t")] if line.strip() else []
    return line.split()


def _header(line: str) -> Optional[Tuple[List[str], List[str]]]:
    """(device columns, trailing column keys) when the line is the matrix header."""
    text = line.replace("\t", "  ")
    marks: List[Tuple[int, int, str]] = []
    for key, rx in _TRAILING_RE:
        m = rx.search(text)
        if m:
            marks.append((m.start(), m.end(), key))
    marks.sort()
    head = text[: marks[0][0]] if marks else text
    devices = head.split()
    if not devices or devices[0] != "GPU0" or not all(_NAME.match(d) for d in devices):
        return None
    if any(d.upper() == "X" or link_type(d)[0] != "unknown" for d in devices):
        return None  # a row, not the header
    if len(devices) > MAX_COLUMNS:
        raise ParseError(f"the topology header lists {len(devices):,} devices; not nvidia-smi output")
    # Anything between the trailing names other than whitespace means this is not the header.
    return devices, [key for _, _, key in marks]


def _assign_trailing(cells: List[str], keys: List[str]) -> Dict[str, Optional[str]]:
    """Affinity cells read from the right. nvidia-smi puts an empty cell before the last value (and on
    some drivers before others), and leaves the CPU affinity empty on some hosts: an empty cell right
    before the last value is padding, and so is any other while more cells are left than columns."""
    out: Dict[str, Optional[str]] = {k: None for k in keys}
    left = list(cells)
    for pos, key in enumerate(reversed(keys)):
        columns_left = len(keys) - pos
        while left and not left[-1] and len(left) > columns_left:
            left.pop()
        if not left:
            break
        value = left.pop()
        out[key] = value if value and value.upper() != "N/A" else None
        if pos == 0 and value and left and not left[-1]:
            left.pop()
    return out


def _next_starts_row(lines: List[str], i: int) -> bool:
    following = next((ln for ln in lines[i + 1:] if ln.strip()), "")
    cells = _cells(following)
    return len(cells) > 1 and cells[0] == "GPU0" and cells[1].upper() == "X"


def parse_topo_matrix(text: str) -> TopoMatrix:
    """The first topology matrix in `text` (which may be a whole report that contains one)."""
    lines = clean_text(text).split("\n")
    start = None
    parsed: Optional[Tuple[List[str], List[str]]] = None
    for i, line in enumerate(lines):
        if "GPU0" not in line:
            continue
        parsed = _header(line)
        if parsed is not None and (parsed[1] or _next_starts_row(lines, i)):
            start = i
            break
        parsed = None
    if start is None or parsed is None:
        raise ParseError("no `nvidia-smi topo -m` matrix (a header row starting with GPU0)")
    columns, keys = parsed
    topo = TopoMatrix(columns=list(dict.fromkeys(columns)))
    n = len(columns)
    known = set(columns)
    in_legend = False
    for line in lines[start + 1:]:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("NIC Legend"):
            in_legend = True
            continue
        if in_legend:
            m = _NIC_LEGEND.match(line)
            if m:
                topo.nic_names[m.group(1)] = m.group(2)
            continue
        if stripped.startswith("Legend"):
            continue
        cells = _cells(line)
        if not cells or cells[0] not in known:
            continue
        name = cells[0]
        if name in topo.rows:
            continue  # a doubled paste: the first reading stays
        row = TopoRow(name=name)
        body = cells[1:]
        for col, cell in zip(columns, body[:n]):
            if not cell:
                continue
            row.links[col] = cell.upper() if cell.upper() == "X" else cell
            if cell.upper() != "X" and link_type(cell)[0] == "unknown":
                topo.notes.append(f"{name}: {cell!r} under {col} is not a link type nvidia-smi prints "
                                  "(a damaged paste?)")
        if len(body) < n:
            topo.notes.append(f"{name}: the row stops after {len(body)} of {n} columns (a truncated paste?)")
        if _GPU.match(name):
            values = _assign_trailing(body[n:], keys)
            row.cpu_affinity = values.get("cpu_affinity")
            row.numa_affinity = values.get("numa_affinity")
            row.gpu_numa_id = values.get("gpu_numa_id")
        topo.rows[name] = row
    missing = [g for g in topo.gpus if g not in topo.rows]
    if missing:
        topo.notes.append("no row for " + ", ".join(missing) + " (a truncated paste?)")
    return topo


# -- facts and words -------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _index(name: str) -> int:
    m = _GPU.match(name)
    assert m is not None
    return int(m.group(1))


def _int(value: Optional[str]) -> Optional[int]:
    return int(value) if value is not None and value.isdigit() else None


def gpu_topology(topo: TopoMatrix, gpu: str) -> GpuTopology:
    """The facts of one GPU (a column name such as "GPU3")."""
    row = topo.rows.get(gpu) or TopoRow(name=gpu)
    links: List[GpuLink] = []
    for peer in topo.gpus:
        if peer == gpu:
            continue
        code = topo.link(gpu, peer)
        if code is None:
            continue
        kind, count = link_type(code)
        links.append(GpuLink(peer=_index(peer), type=kind, code=code, nvlinks=count))
    nics: List[GpuNicLink] = []
    for nic in topo.nics:
        code = topo.link(gpu, nic)
        if code is None:
            continue
        nics.append(GpuNicLink(name=topo.nic_names.get(nic, nic), type=link_type(code)[0], code=code))
    return GpuTopology(
        index=_index(gpu), cpu_affinity=row.cpu_affinity, numa_affinity=row.numa_affinity,
        numa_node=_int(row.numa_affinity), gpu_numa_id=_int(row.gpu_numa_id),
        links=tuple(links), nics=tuple(nics),
    )


def _pairs(topo: TopoMatrix) -> Tuple[int, List[Tuple[str, str, str]]]:
    gpus = topo.gpus
    known = []
    total = 0
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            total += 1
            code = topo.link(a, b)
            if code is not None:
                known.append((a, b, code))
    return total, known


def summary(topo: TopoMatrix) -> str:
    """One plain sentence: "all 8 GPUs connected by NVLink (NV18 each pair)", "GPU0-GPU1 over PCIe
    through the CPU (PHB)", ..."""
    gpus = topo.gpus
    if not gpus:
        return "no GPU in the topology matrix"
    if len(gpus) == 1:
        row = topo.rows.get(gpus[0])
        where = []
        if row and row.cpu_affinity:
            where.append(f"CPUs {row.cpu_affinity}")
        if row and row.numa_affinity:
            where.append(f"NUMA node {row.numa_affinity}")
        return "1 GPU, no peer" + (f" ({', '.join(where)})" if where else "")
    total, known = _pairs(topo)
    nv = [(a, b, c) for a, b, c in known if link_type(c)[0] == "nvlink"]
    other = [(a, b, c) for a, b, c in known if link_type(c)[0] != "nvlink"]
    parts: List[str] = []
    if nv and not other and len(nv) == total:
        codes = sorted({c for _, _, c in nv}, key=lambda c: link_type(c)[1] or 0)
        if total == 1:
            a, b, c = nv[0]
            parts.append(f"{a}-{b} connected by NVLink ({c})")
        elif len(codes) == 1:
            parts.append(f"all {len(gpus)} GPUs connected by NVLink ({codes[0]} each pair)")
        else:
            parts.append(f"all {len(gpus)} GPUs connected by NVLink ({', '.join(codes)})")
    elif nv:
        codes = sorted({c for _, _, c in nv}, key=lambda c: link_type(c)[1] or 0)
        parts.append(f"NVLink between {len(nv)} of {total} GPU pairs ({', '.join(codes)})")
        if other:
            parts.append(f"the other {len(other)} " + _pcie_words(other, total_is_pairs=False))
    elif other:
        if total == 1:
            a, b, c = other[0]
            kind = link_type(c)[0]
            parts.append(f"{a}-{b} {WORDS[kind]} ({c})")
        else:
            parts.append(_pcie_words(other, total_is_pairs=len(other) == total, gpus=len(gpus)))
    if len(known) < total:
        parts.append(f"the links of {total - len(known)} GPU pair(s) are not shown")
    return "; ".join(parts) if parts else f"{len(gpus)} GPUs, links not shown"


def _pcie_words(pairs: Sequence[Tuple[str, str, str]], total_is_pairs: bool, gpus: int = 0) -> str:
    by_code: Dict[str, int] = {}
    for _, _, c in pairs:
        by_code[c] = by_code.get(c, 0) + 1
    if len(by_code) == 1:
        code = next(iter(by_code))
        words = WORDS[link_type(code)[0]]
        if total_is_pairs and gpus:
            return f"all {len(pairs)} pairs of the {gpus} GPUs {words} ({code})"
        return f"{words} ({code})"
    order = ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"]
    ranked = sorted(by_code.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
    head = "GPU pairs over PCIe: " if total_is_pairs else "over PCIe: "
    return head + ", ".join(f"{n} {WORDS[link_type(c)[0]].replace('over PCIe ', '')} ({c})" for c, n in ranked)


def summary_facts(topo: TopoMatrix) -> CudaTopology:
    """What the scan report carries under runtimes.cuda.topology."""
    total, known = _pairs(topo)
    return CudaTopology(
        summary=summary(topo),
        gpu_count=len(topo.gpus),
        nvlink_pairs=sum(1 for _, _, c in known if link_type(c)[0] == "nvlink"),
        gpu_pairs=total,
        nics=tuple(topo.nic_names.get(n, n) for n in topo.nics),
    )




# -- the probe's part ------------------------------------------------------------------------------

CAPTURE = "nvidia-smi-topo-m.txt"


def nameless_gpu(topology: GpuTopology) -> GpuFacts:
    """A GPU known only from the matrix (a bundle that holds nothing else from nvidia-smi): the
    driver lists it, but its name and memory are not in this capture."""
    return GpuFacts(
        vendor="nvidia", apis=("cuda",), pci_vendor_id="0x10de", topology=topology, sources=("nvidia",),
        notes=("known only from `nvidia-smi topo -m`; capture `nvidia-smi -q -x` for its name and memory",),
    )


def with_topology(
    host: Host, gpus: List[GpuFacts], warnings: List[str]
) -> Tuple[List[GpuFacts], Optional[CudaTopology]]:
    """`gpus` (nvidia-smi's, in its order) each with its row of the matrix, and the summary for the
    report; a capture that is absent changes nothing. GPUi of the matrix is the i-th GPU nvidia-smi
    lists (both number GPUs by PCI bus order)."""
    cap = host.get(CAPTURE)
    if not cap.ok:
        if cap.status in ("error", "timeout"):
            warnings.append(cap.error or f"{CAPTURE}: {cap.status}")
        return gpus, None
    try:
        topo = parse_topo_matrix(cap.text())
    except ParseError as exc:
        warnings.append(f"{CAPTURE}: {exc}")
        return gpus, None
    warnings.extend(f"{CAPTURE}: {note}" for note in topo.notes)
    facts = {name: gpu_topology(topo, name) for name in topo.gpus}
    if not gpus:
        gpus = [nameless_gpu(t) for t in sorted(facts.values(), key=lambda t: t.index)]
    else:
        if len(facts) != len(gpus):
            warnings.append(f"nvidia-smi lists {len(gpus)} GPU(s) but its topology matrix {len(facts)}; "
                            "the matrix is matched to the GPUs in nvidia-smi's order")
        gpus = [replace(g, topology=facts.get(f"GPU{i}")) if f"GPU{i}" in facts else g
                for i, g in enumerate(gpus)]
    return gpus, summary_facts(topo)


__all__ = ["CAPTURE", "TopoMatrix", "TopoRow", "gpu_topology", "link_type", "parse_topo_matrix", "summary",
           "summary_facts", "with_topology"]
