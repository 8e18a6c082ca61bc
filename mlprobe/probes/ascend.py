"""Huawei Ascend NPUs from `npu-smi info` (the driver's tool) and the CANN toolkit's
`ascend_toolkit_install.info`.

`npu-smi info` prints a header with the driver's version (`| npu-smi 25.0.rc1.1  Version: 25.0.rc1.1 |`),
then one block of two rows per chip:

    | 0     910B2C              | OK            | 88.3        34                0    / 0             |
    | 0                         | 0000:5A:00.0  | 0           0    / 0          3406 / 65536         |

(NPU id and name | health | power, temperature, huge pages; then chip id and, on some cards, its
physical id | PCI bus id | AI core use, memory, HBM as used / total MB). A card with two chips (the
first Ascend 910) has two blocks under one NPU id; torch-npu numbers each chip as a device
(`npu:0`, `npu:1`), so each block is one device here. The process table that follows
(`| NPU  Chip | Process id | ...`) is not read.

`ascend_toolkit_install.info` is `key=value` lines (`package_name=Ascend-cann-toolkit`,
`version=8.3.RC2`, `arch=x86_64`, ...): the CANN version torch-npu is built against.
"""

from __future__ import annotations

import re
from typing import Dict, List, NamedTuple, Optional

from ..errors import ParseError
from ..model.facts import CannRuntime, Contribution, GpuFacts, Runtimes
from ..model.vendors import normalise_bus_id
from ..scan.capture import Host
from ._util import ANSI, nothing_read, parse_capture

NPU_SMI = "npu-smi-info.txt"
TOOLKIT_INFO = "ascend-toolkit-install-info.txt"

_HEADER = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_BUS = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_USED_TOTAL = re.compile(r"(\d+)\s*/\s*(\d+)")


class NpuChip(NamedTuple):
    npu: int  # npu-smi's NPU id (the card)
    chip: int  # the chip on that card
    name: str  # as npu-smi prints it: "910B2C", "Ascend910", "310P3"
    health: Optional[str]  # "OK", "Warning", ...
    pci_bus_id: Optional[str]  # as printed, "0000:5A:00.0" (some pastes hide it: "0000:xx:00.0")
    memory_total_mb: Optional[int]  # HBM where the table has it, else the chip's memory


class NpuSmi(NamedTuple):
    version: Optional[str]  # the driver's, from the header
    chips: List[NpuChip]


def _cells(line: str) -> List[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_npu_smi_info(text: str) -> NpuSmi:
    """`npu-smi info` -> the driver version and one NpuChip per block. A pasted prompt line, a
    missing process table and a cut-off last block are accepted; text with neither the header nor
    a chip row is not this tool's output (ParseError)."""
    text = ANSI.sub("", text)
    version = None
    chips: List[NpuChip] = []
    hbm_column = True
    first: Optional[List[str]] = None
    for raw in text.splitlines():
        line = raw.strip()
        m = _HEADER.search(line)
        if m and version is None:
            version = m.group(2)
            continue
        if not line.startswith("|"):
            first = None if line.startswith("+") else first
            continue
        cells = _cells(line)
        if len(cells) < 3:
            continue
        if "Process id" in line or "Process name" in line:
            break  # the process table: no more chips
        if cells[0].startswith("NPU") or cells[0].startswith("Chip"):
            if "HBM-Usage" in line or "Memory-Usage" in line:
                hbm_column = "HBM-Usage" in line
            continue
        words = cells[0].split()
        if first is None:
            if len(words) >= 2 and words[0].isdigit():
                first = cells
            continue
        # the block's second row: chip id (and physical id) | bus id | usage
        if not words or not words[0].isdigit():
            first = None
            continue
        name_words = first[0].split()
        pairs = _USED_TOTAL.findall(cells[2])
        total = None
        if pairs:
            total = int((pairs[-1] if hbm_column else pairs[0])[1]) or None
        bus = cells[1] if _BUS.match(cells[1]) else None
        chips.append(NpuChip(int(name_words[0]), int(words[0]), " ".join(name_words[1:]),
                             first[1] or None, bus, total))
        first = None
    if version is None and not chips and text.strip():
        raise ParseError("no `npu-smi` header and no NPU row: not `npu-smi info` output")
    return NpuSmi(version, chips)


def parse_toolkit_info(text: str) -> Dict[str, str]:
    """`ascend_toolkit_install.info` -> its key=value pairs; ParseError without a `version`."""
    out: Dict[str, str] = {}
    for raw in text.splitlines():
        key, sep, value = raw.strip().partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    if "version" not in out:
        raise ParseError("ascend_toolkit_install.info has no version= line")
    return out


def display_name(name: str) -> str:
    """"910B2C" -> "Ascend 910B2C"; "Ascend910" -> "Ascend 910"."""
    rest = re.sub(r"^ascend\s*", "", name.strip(), flags=re.I)
    return f"Ascend {rest}" if rest else "Ascend"


def probe(host: Host) -> Contribution:
    out = Contribution()
    errors: List[str] = []
    smi = parse_capture(host, NPU_SMI, parse_npu_smi_info, errors)
    info = parse_capture(host, TOOLKIT_INFO, parse_toolkit_info, errors)
    if smi is None and info is None:
        return nothing_read(out, errors, "no npu-smi and no CANN toolkit")
    for c in (smi.chips if smi else []):
        bus = c.pci_bus_id
        out.gpus.append(GpuFacts(
            vendor="huawei", name=display_name(c.name), driver_version=smi.version if smi else None,
            memory_bytes=c.memory_total_mb * 1024 * 1024 if c.memory_total_mb else None, integrated=False,
            apis=("npu",), pci_bus_id=normalise_bus_id(bus.lower()) if bus else None, pci_vendor_id="0x19e5",
            chip_id=f"{c.npu}:{c.chip}", sources=("npu-smi",),
            notes=(f"npu-smi health: {c.health}",) if c.health and c.health != "OK" else ()))
    if info is not None:
        out.runtimes = Runtimes(cann=CannRuntime.of(version=info.get("version"), arch=info.get("arch"), installed=True,
                                                    driver_version=smi.version if smi else None))
    elif smi is not None and smi.chips and host.get(TOOLKIT_INFO).status == "absent":
        # NPUs, and the toolkit's record is not where CANN puts it: no CANN (said, with the path)
        out.runtimes = Runtimes(cann=CannRuntime.of(version=None, installed=False, driver_version=smi.version))
        out.warnings.append("npu-smi lists Ascend NPUs but no CANN toolkit was found "
                            "(ascend-toolkit/latest/<arch>-linux/ascend_toolkit_install.info): "
                            "torch-npu needs CANN")
    if errors:
        out.warnings.extend(errors)
    return out
