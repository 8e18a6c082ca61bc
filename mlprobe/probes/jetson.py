"""NVIDIA Jetson / Tegra boards, which have no nvidia-smi: the L4T release file (/etc/nv_tegra_release)
and the device tree's `model` and `compatible` (/proc/device-tree/). The SoC named in `compatible`
(`nvidia,tegra234`) gives the integrated GPU and its compute capability, the release line
(`# R35 (release), REVISION: 3.1, ...`) the L4T version and through it the JetPack
(knowledge/jetson.json). `compatible` is a list of NUL-terminated strings; pasted into a ticket the
NULs vanish (`nvidia,p3768-0000+p3767-0003nvidia,tegra234`), so both forms are read.

Inside a container only the release file is mounted (no device tree), and on JetPack 6 nvidia-smi prints
a reduced table (`Orin (nvgpu)`, every other field N/A). There the SoC is narrowed from what the capture
holds: the GPU name nvidia-smi prints, the L4T series (each supports a set of SoCs) and the CPU cores'
MIDR ids (each Jetson SoC has its own cores); where one SoC is left, its family and compute capability
follow (knowledge/jetson.json `smi_names`, `l4t_socs`, `cpu_cores`, `smi_branches`)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ParseError
from ..model import knowledge as kb
from ..model.facts import Contribution, CudaRuntime, GpuFacts, JetsonInfo, Runtimes
from ..scan.capture import Host
from ._util import nothing_read, parse_capture

SOURCE = "jetson"
_RELEASE = re.compile(r"#\s*R(\d+)\s*\(([^)]*)\)\s*,\s*REVISION:\s*([\d.]+)(.*)$", re.M)


def parse_nv_tegra_release(text: str) -> Dict[str, Any]:
    """`# R35 (release), REVISION: 3.1, GCID: 32827747, BOARD: t186ref, EABI: aarch64, DATE: ...`
    -> {"l4t": "35.3.1", "l4t_major": 35, "kind": "release", "board": "t186ref", "gcid": ...}."""
    m = _RELEASE.search(text.replace("\x00", ""))
    if not m:
        raise ParseError("no '# R<nn> (release), REVISION: x.y' line: not an /etc/nv_tegra_release")
    revision = m.group(3).strip(".")
    parts = revision.split(".")
    l4t = ".".join([m.group(1)] + parts + ["0"] * max(0, 2 - len(parts)))
    fields = dict(re.findall(r"\b(GCID|BOARD|EABI|DATE):\s*([^,]+)", m.group(4)))
    return {"l4t": l4t, "l4t_major": int(m.group(1)), "kind": m.group(2).strip(), "board": fields.get("BOARD", "").strip() or None,
            "gcid": fields.get("GCID", "").strip() or None}


def parse_compatible(text: str) -> List[str]:
    """The device tree's `compatible` strings: NUL-separated as the kernel gives them, or run together
    as a paste prints them (a new entry starts at each `vendor,` prefix after the first)."""
    if "\x00" in text:
        items = [x.strip() for x in text.split("\x00")]
    else:
        items = [x.strip() for x in re.split(r"(?<=[0-9a-z])(?=(?:nvidia|arm|qcom),)", text.strip())]
    items = [x for x in items if re.fullmatch(r"[a-z0-9-]+,[A-Za-z0-9+._-]+", x)]
    if not items:
        raise ParseError("no `vendor,name` entries in the device tree's compatible list")
    return items


# a shell prompt pasted before the output (`user@host:~$ cat /proc/device-tree/model`)
_PROMPT_LINE = re.compile(r"^[^\n]*(?:[$#%>]\s+(?:sudo\s+)?(?:cat|tr|xargs)\b[^\n]*|[$#>])\s*\n")


def parse_model(text: str) -> str:
    text = _PROMPT_LINE.sub("", text.replace("\r\n", "\n"), count=1)
    model = " ".join(text.replace("\x00", " ").split())
    if not model:
        raise ParseError("the device tree's model is empty")
    return model


def soc_row(compatible: List[str]) -> Optional[Dict[str, Any]]:
    names = {c.split(",", 1)[1] for c in compatible if c.startswith("nvidia,")}
    return next((r for r in kb.rows("jetson", "socs") if r.get("soc") in names), None)


def jetpack_for(l4t: Optional[str]) -> Optional[str]:
    """The JetPack release of an L4T release: exact where the table lists it, else its major series."""
    if not l4t:
        return None
    exact = next((str(r["jetpack"]) for r in kb.rows("jetson", "releases") if r.get("l4t") == l4t), None)
    if exact:
        return exact
    major = int(l4t.split(".")[0])
    row = next((r for r in kb.rows("jetson", "l4t_majors") if r.get("l4t_major") == major), None)
    return f"{row['jetpack_major']}.x" if row else None


# nvidia-smi's name for a Tegra GPU (nvgpu is Tegra's GPU driver), in the table, `-L` and the CSV query
_NVGPU = re.compile(r"(?<![\w-])([A-Za-z][\w-]*(?: [A-Za-z][\w-]*)? \(nvgpu\))")
_SMI_VERSION = re.compile(r"NVIDIA-SMI\s+(\d+)\.\d+")
# the nvidia-smi captures a Tegra GPU name may be in; live, only those the nvidia probe takes anyway
_SMI_CAPTURES = ("nvidia-smi.txt", "nvidia-smi-L.txt", "nvidia-smi-query.csv")
_SMI_LIVE = ("nvidia-smi-query.csv",)


def smi_tegra_gpu(texts: List[str]) -> Optional[Tuple[str, Optional[int]]]:
    """(the Tegra GPU name nvidia-smi printed, nvidia-smi's major version) from its outputs, or None."""
    name = next((m.group(1) for t in texts for m in [_NVGPU.search(t)] if m), None)
    if name is None:
        return None
    major = next((int(m.group(1)) for t in texts for m in [_SMI_VERSION.search(t)] if m), None)
    return name, major


_MIDR = re.compile(r"^CPU (implementer|part)\s*:\s*(0x[0-9a-fA-F]+)\s*$", re.M)


def cpu_core_ids(cpuinfo: Optional[str], lscpu: Optional[str]) -> List[Tuple[str, str]]:
    """The (implementer, part) MIDR pairs /proc/cpuinfo lists, or the core names lscpu prints mapped back
    through jetson.json `cpu_cores` (lscpu names the part: `Model name: Cortex-A78AE`)."""
    pairs: List[Tuple[str, str]] = []
    if cpuinfo:
        impl: Optional[str] = None
        for key, value in _MIDR.findall(cpuinfo):
            number = int(value, 16)
            if key == "implementer":
                impl = f"0x{number:02x}"
            elif impl is not None and (impl, f"0x{number:03x}") not in pairs:
                pairs.append((impl, f"0x{number:03x}"))
    if not pairs and lscpu:
        names = re.findall(r"^\s*Model name:\s*(\S.*?)\s*$", lscpu, re.M)
        for row in kb.rows("jetson", "cpu_cores"):
            if row.get("core") in names:
                pairs.append((str(row["implementer"]), str(row["part"])))
    return pairs


def narrow_socs(gpu_name: Optional[str], l4t_major: Optional[int], cores: List[Tuple[str, str]]) -> Tuple[List[str], List[str]]:
    """The Jetson SoCs every fact allows, and the facts that narrowed them (in words)."""
    allowed: Optional[set[str]] = None
    why: List[str] = []

    def keep(socs: Tuple[str, ...], what: str) -> None:
        nonlocal allowed
        allowed = set(socs) if allowed is None else allowed & set(socs)
        why.append(what)

    if gpu_name:
        row = next((r for r in kb.rows("jetson", "smi_names") if re.search(str(r["pattern"]), gpu_name)), None)
        if row is not None:
            keep(tuple(str(x) for x in row.get("socs") or ()), f"nvidia-smi names the GPU {gpu_name!r}")
    if l4t_major is not None:
        row = next((r for r in kb.rows("jetson", "l4t_socs") if r.get("l4t_major") == l4t_major), None)
        if row is not None:
            keep(tuple(str(x) for x in row.get("socs") or ()), f"L4T R{l4t_major}")
    for impl, part in cores:
        row = next((r for r in kb.rows("jetson", "cpu_cores")
                    if r.get("implementer") == impl and r.get("part") == part), None)
        if row is not None:
            keep(tuple(str(x) for x in row.get("socs") or ()), f"{row['core']} CPU cores")
    return sorted(allowed or ()), why


def probe(host: Host) -> Contribution:
    out = Contribution()
    errors: List[str] = []
    release = parse_capture(host, "nv_tegra_release.txt", parse_nv_tegra_release, errors)
    compatible = parse_capture(host, "device-tree-compatible.txt", parse_compatible, errors)
    model = parse_capture(host, "device-tree-model.txt", parse_model, errors)
    row = soc_row(compatible) if compatible else None
    names = _SMI_LIVE if host.kind == "live" else _SMI_CAPTURES
    smi = smi_tegra_gpu([c.text() for c in (host.get(n) for n in names) if c.ok])
    is_tegra = (row is not None or release is not None or smi is not None
                or bool(model and re.search(r"\bJetson\b", model, re.I)))
    if not is_tegra:
        if compatible is not None or model is not None:
            out.status = "absent"
            out.error = "the device tree names no NVIDIA Tegra SoC (not a Jetson board)"
            return out
        return nothing_read(out, errors, "no /etc/nv_tegra_release or device tree capture (not a Jetson board)")
    notes: List[str] = []
    l4t = release["l4t"] if release else None
    jetpack = jetpack_for(l4t)
    if row is None:
        cores = cpu_core_ids(host.get("proc-cpuinfo.txt").text() or None, host.get("lscpu.txt").text() or None)
        socs, why = narrow_socs(smi[0] if smi else None, release["l4t_major"] if release else None, cores)
        if len(socs) == 1:
            row = next((r for r in kb.rows("jetson", "socs") if r.get("soc") == socs[0]), None)
            if row is not None:
                where = ("the device tree names no Tegra SoC mlprobe knows" if compatible is not None
                         else "no device tree in the capture")
                notes.append(f"{where}; one Jetson SoC fits {' and '.join(why)}: {row['soc']} ({row['family']})")
        if row is None:
            left = f" (still {', '.join(socs)})" if len(socs) > 1 else ""
            where = ("the device tree's compatible list names no Tegra SoC mlprobe knows" if compatible is not None
                     else "no device tree names the Tegra SoC")
            notes.append(f"{where} and the capture does not narrow it to one{left}: the GPU's compute "
                         "capability is unknown")
    if jetpack is None and smi is not None and smi[1] is not None:
        branch = next((r for r in kb.rows("jetson", "smi_branches") if r.get("smi_major") == smi[1]), None)
        if branch is not None:
            jetpack = f"{branch['jetpack_major']}.x"
            notes.append(f"JetPack {jetpack} from nvidia-smi {smi[1]} on a Jetson (no /etc/nv_tegra_release in "
                         "the capture)")
    family = row["family"] if row else None
    name = model or (f"NVIDIA Jetson {family}" if family else "NVIDIA Jetson")
    out.gpus = [GpuFacts(
        vendor="nvidia",
        name=f"{name} ({family} GPU)" if family and family.split()[0].lower() not in name.lower() else name,
        compute_capability=row["compute_capability"] if row else None,
        architecture=row["architecture"] if row else None,
        integrated=True,
        apis=("cuda",),
        sources=(SOURCE,),
        notes=tuple(notes),
    )]
    out.runtimes = Runtimes(cuda=CudaRuntime.of(jetson=JetsonInfo(
        l4t=l4t, jetpack=jetpack, soc=row["soc"] if row else None, module=model,
        compatible=tuple(compatible or ()), board=release["board"] if release else None,
    )))
    if errors:
        out.warnings.extend(errors)
    return out


__all__ = ["cpu_core_ids", "jetpack_for", "narrow_socs", "parse_compatible", "parse_model", "parse_nv_tegra_release",
           "probe", "smi_tegra_gpu", "soc_row"]
