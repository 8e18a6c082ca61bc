"""AMD ROCm: `rocminfo`, `rocm-smi`, /opt/rocm/.info/version, the KFD topology, HSA_OVERRIDE_GFX_VERSION.

Two gfx targets per GPU, on purpose:

- `gfx_target` is the hardware's own target. The kernel's KFD topology reports it
  (`gfx_target_version`, never overridden); otherwise the PCI device id (rocminfo's `Chip ID`)
  is looked up in knowledge/amd_gfx.json; otherwise it falls back to the runtime target.
- `runtime_gfx_target` is what the ROCm runtime reports (rocminfo's agent `Name:`). It differs
  from the hardware's when HSA_OVERRIDE_GFX_VERSION is in effect, e.g. an RX 6700 XT (gfx1031)
  running as gfx1030. That is worth a sentence to the user, so it becomes a note and a warning.

Only `Device Type: GPU` agents are GPUs: CPU agents and NPU/DSP agents (`aie2`) are not.
For an APU, memory_bytes is the GPU agent's coarse-grained pool: memory the runtime can allocate,
carved out of (or shared with) system memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..model import knowledge as kb
from ..errors import ParseError
from ..model.facts import Contribution, CpuFacts, GpuFacts, RocmRuntime, Runtimes
from ..scan.capture import Host
from ..model.hw.amd import GFX_NAME, amd_device as amd_device, architecture_of as architecture_of
from ..model.hw.amd import bus_id_from_bdfid as bus_id_from_bdfid, gfx_from_version as gfx_from_version
from ._util import clean_lines as clean_lines, nothing_read, parse_capture
from .rocm_smi import (SmiCard as SmiCard, _int, merge_cards as merge_cards, parse_amd_smi as parse_amd_smi,
                       parse_rocm_smi as parse_rocm_smi, parse_rocm_version as parse_rocm_version)

# `amd-smi list` and `amd-smi static`, text and --json (rocm-smi's successor; rocm-smi is deprecated).
AMD_SMI = ("amd-smi-list.txt", "amd-smi-static.txt", "amd-smi-list.json", "amd-smi-static.json")


# -- gfx targets in tool output -------------------------------------------------------------


def _isa_target(isa: str) -> Optional[str]:
    """'amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-' -> 'gfx942'; generic ISAs -> None."""
    m = re.search(r"(gfx[0-9a-z-]+)", isa.lower())
    if not m or "generic" in m.group(1):
        return None
    t = m.group(1).split(":")[0]
    return t if GFX_NAME.match(t) else None


# -- rocminfo ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AmdAgent:
    """One HSA agent as rocminfo prints it."""

    number: int
    name: Optional[str] = None  # "gfx1030" for a GPU, the CPU's name for a CPU, "aie2" for an NPU
    uuid: Optional[str] = None  # "GPU-8d1457e2c20f59d2"; None for "GPU-XX" / empty
    marketing_name: Optional[str] = None
    vendor_name: Optional[str] = None
    device_type: Optional[str] = None  # "GPU", "CPU", "DSP", ...
    node: Optional[int] = None  # the KFD node number
    chip_id: Optional[int] = None  # the PCI device id
    bdfid: Optional[int] = None
    compute_units: Optional[int] = None
    memory_properties: Optional[Tuple[str, ...]] = None  # None: no such line (old rocminfo)
    features: Tuple[str, ...] = ()
    coarse_pool_kb: Optional[int] = None  # first GLOBAL coarse-grained pool
    isas: Tuple[str, ...] = ()

    @property
    def is_gpu(self) -> bool:
        """A GPU, or a ROCm-family accelerator listed with another Device Type (Hygon's `DCU`) that
        runs gfx code; CPU agents and NPU/DSP agents (`aie2`) are not."""
        if self.device_type is not None and self.device_type.upper() in ("GPU", "CPU", "DSP", "AIE"):
            return self.device_type.upper() == "GPU"
        return bool(self.name and GFX_NAME.match(self.name.split(":")[0].lower()))

    @property
    def family(self) -> Optional[Dict[str, Any]]:
        """The rocm_family.json row of a non-GPU accelerator agent (Hygon DCU), or None."""
        if self.device_type is None or self.device_type.upper() == "GPU":
            return None
        kind = self.device_type.upper()
        rows = [r for r in kb.rows("rocm_family") if str(r.get("device_type", "")).upper() == kind]
        vendor = (self.vendor_name or "").strip()
        named = next((r for r in rows if vendor in (r.get("vendor_names") or [])), None)
        return named or (rows[-1] if rows else None)

    @property
    def runtime_target(self) -> Optional[str]:
        if self.name and GFX_NAME.match(self.name.lower()):
            return self.name.lower()
        for isa in self.isas:
            t = _isa_target(isa)
            if t:
                return t
        return None


@dataclass(frozen=True)
class RocmInfo:
    agents: Tuple[AmdAgent, ...] = ()
    runtime_version: Optional[str] = None  # HSA runtime, "1.14"
    rock_module_version: Optional[str] = None  # "ROCk module version 6.8.5 is loaded"
    wsl: bool = False
    errors: Tuple[str, ...] = ()

    @property
    def gpus(self) -> Tuple[AmdAgent, ...]:
        return tuple(a for a in self.agents if a.is_gpu)


_KV = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 .()/_-]*?)\s*:\s?(.*)$")
_ROCMINFO_ERRORS = re.compile(
    r"(Unable to open /dev/kfd.*|Failed to get user name.*|hsa api call failure.*|"
    r"HSA_STATUS_ERROR\w*.*|ROCk module is NOT loaded.*)", re.IGNORECASE)


def parse_rocminfo(text: str) -> RocmInfo:
    """`rocminfo` (any ROCm from 1.x to 7.x, WSL flavour included) -> agents and header facts."""
    lines = clean_lines(text)
    joined = "\n".join(lines)
    if not re.search(r"HSA (System Attributes|Agents)|ROCk module|^\s*Agent \d+\s*$|/dev/kfd|hsa api call",
                     joined, re.MULTILINE | re.IGNORECASE):
        raise ParseError("not rocminfo output (no HSA agents, no ROCk module line)")
    header: Dict[str, str] = {}
    agents: Dict[int, Dict[str, Any]] = {}
    order: List[int] = []
    cur: Optional[Dict[str, Any]] = None
    section = "agent"
    errors: List[str] = []
    rock = None
    for line in lines:
        s = line.strip()
        if not s:
            continue
        em = _ROCMINFO_ERRORS.search(s)
        if em:
            errors.append(em.group(1).strip())
        m = re.match(r"ROCk module(?: version (\S+))? is loaded", s)
        if m:
            rock = rock or m.group(1)
            continue
        m = re.fullmatch(r"Agent\s+(\d+)", s)
        if m:
            n = int(m.group(1))
            if n not in agents:  # a repeated "Agent N" line continues that agent
                agents[n] = {"number": n, "pools": [], "isas": []}
                order.append(n)
            cur = agents[n]
            section = "agent"
            continue
        if s.startswith("*** Done"):
            cur = None
            continue
        if cur is None:
            kv = _KV.match(line)
            if kv:
                header.setdefault(kv.group(1).strip(), kv.group(2).strip())
            continue
        if re.fullmatch(r"Pool Info:?", s):
            section = "pool"
            continue
        if re.fullmatch(r"ISA Info:?", s):
            section = "isa"
            continue
        if re.fullmatch(r"Cache Info:?", s):
            continue
        kv = _KV.match(line)
        if not kv:
            continue
        key, value = kv.group(1).strip(), kv.group(2).strip()
        if key == "Name":
            if section == "isa" or value.lower().startswith("amdgcn-"):
                cur["isas"].append(value)
            else:
                cur.setdefault("name", value)
        elif key == "Segment":
            cur["pools"].append({"segment": value.upper()})
            section = "pool"
        elif key == "Size" and section == "pool" and cur["pools"] and "kb" not in cur["pools"][-1]:
            if re.search(r"\bKB\b", value, re.IGNORECASE):
                cur["pools"][-1]["kb"] = _int(value)
        else:
            cur.setdefault(key, value)
    built = tuple(_agent(agents[n]) for n in order)
    wsl = bool(re.search(r"^\s*WSL environment detected", joined, re.MULTILINE))
    return RocmInfo(
        agents=built,
        runtime_version=_version_only(header.get("Runtime Version")),
        rock_module_version=rock,
        wsl=wsl,
        errors=tuple(dict.fromkeys(errors)),
    )


def _version_only(v: Optional[str]) -> Optional[str]:
    m = re.match(r"^\s*(\d+(?:\.\d+)*)", v or "")
    return m.group(1) if m else None


def _agent(d: Dict[str, Any]) -> AmdAgent:
    uuid = d.get("Uuid") or None
    if uuid and (uuid.upper().endswith("-XX") or not re.fullmatch(r"[A-Za-z]+-[0-9a-fA-F]{4,}", uuid)):
        uuid = None
    chip = d.get("Chip ID")
    chip_id = None
    if chip:
        m = re.search(r"\(0x([0-9a-fA-F]+)\)", chip)
        chip_id = int(m.group(1), 16) if m else _int(chip)
    coarse = None
    for p in d["pools"]:
        seg = p.get("segment", "")
        if "GLOBAL" in seg and "COARSE" in seg and "KERNARG" not in seg and p.get("kb"):
            coarse = p["kb"]
            break
    mem_props: Optional[Tuple[str, ...]] = None
    if "Memory Properties" in d:
        mem_props = tuple(x for x in re.split(r"[\s,]+", d["Memory Properties"]) if x)
    features = tuple(x for x in re.split(r"[\s,]+", d.get("Features", d.get("Feature", ""))) if x)
    dtype = d.get("Device Type")
    return AmdAgent(
        number=d["number"],
        name=d.get("name") or None,
        uuid=uuid,
        marketing_name=d.get("Marketing Name") or None,
        vendor_name=d.get("Vendor Name") or None,
        device_type=dtype.split()[0].upper() if dtype else None,
        node=_int(d.get("Node", "")),
        chip_id=chip_id or None,
        bdfid=_int(d.get("BDFID", "")),
        compute_units=_int(d.get("Compute Unit", "")),
        memory_properties=mem_props,
        features=features,
        coarse_pool_kb=coarse,
        isas=tuple(d["isas"]),
    )


# -- KFD topology ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KfdNode:
    node: int
    props: Dict[str, int] = field(default_factory=dict)

    @property
    def is_gpu(self) -> bool:
        return self.props.get("simd_count", 0) > 0 or self.props.get("gfx_target_version", 0) > 0

    @property
    def gfx_target(self) -> Optional[str]:
        v = self.props.get("gfx_target_version")
        return gfx_from_version(str(v)) if v else None

    @property
    def compute_units(self) -> Optional[int]:
        simd, per_cu = self.props.get("simd_count"), self.props.get("simd_per_cu")
        return simd // per_cu if simd and per_cu else None

    @property
    def pci_bus_id(self) -> Optional[str]:
        return bus_id_from_bdfid(self.props.get("location_id"), self.props.get("domain", 0))

    @property
    def uuid(self) -> Optional[str]:
        u = self.props.get("unique_id")
        return f"GPU-{u:016x}" if u and u < 1 << 64 else None


def parse_kfd_topology(text: str) -> List[KfdNode]:
    """kfd-topology.txt: each node's `properties` file, preceded by `# node N`."""
    nodes: Dict[int, Dict[str, int]] = {}
    order: List[int] = []
    cur: Optional[Dict[str, int]] = None
    seen = False
    for line in clean_lines(text):
        s = line.strip()
        m = re.fullmatch(r"#\s*node\s+(\d+)", s)
        if m:
            n = int(m.group(1))
            if n not in nodes:
                nodes[n] = {}
                order.append(n)
            cur = nodes[n]
            continue
        m = re.fullmatch(r"([a-z][a-z0-9_]*)\s+(\d{1,20})", s)
        if not m:
            continue
        seen = True
        if cur is None:
            nodes[0] = {}
            order.append(0)
            cur = nodes[0]
        cur.setdefault(m.group(1), int(m.group(2)))
    if not seen:
        raise ParseError("no KFD node properties (`name value` lines) found")
    return [KfdNode(n, nodes[n]) for n in order]


# -- building facts ----------------------------------------------------------------------------


def override_sentence(name: Optional[str], hw: str, runtime: str) -> str:
    """The same words scan.hardware_warnings uses, so the two collapse into one warning."""
    return (f"{name or 'AMD GPU'} is {hw} but the ROCm runtime reports {runtime}: "
            f"HSA_OVERRIDE_GFX_VERSION is in effect (unofficial)")


def _note(hw: str, runtime: str, env: Optional[str]) -> str:
    if env:
        how = f"HSA_OVERRIDE_GFX_VERSION={env} makes ROCm run this {hw} as {runtime}"
    else:
        how = (f"ROCm runs this {hw} as {runtime}, which is what HSA_OVERRIDE_GFX_VERSION does "
               f"(the environment was not captured)")
    return f"{how}; unofficial: kernels built for {runtime} may fail or compute wrong results on {hw}"


def _integrated(table: Optional[bool], mem_props: Optional[Tuple[str, ...]]) -> Optional[bool]:
    if mem_props is not None and "APU" in (p.upper() for p in mem_props):
        return True
    if table is not None:
        return table
    if mem_props is not None:
        return False  # rocminfo printed the line and it does not say APU
    return None


def gpus_from_rocminfo(info: RocmInfo, kfd: List[KfdNode], env: Optional[str] = None) -> List[GpuFacts]:
    """rocminfo's GPU agents, completed from the KFD node of the same number (domain, hardware target)."""
    kfd_by_node = {n.node: n for n in kfd if n.is_gpu}
    kfd_by_loc = {n.props.get("location_id"): n for n in kfd if n.is_gpu and n.props.get("location_id")}
    out = []
    for a in info.gpus:
        node = kfd_by_node.get(a.node) if a.node is not None else None
        if node is None and a.bdfid:
            node = kfd_by_loc.get(a.bdfid)
        device_id = f"0x{a.chip_id:04x}" if a.chip_id and a.chip_id <= 0xFFFF else None
        if device_id is None and node is not None and node.props.get("device_id"):
            device_id = f"0x{node.props['device_id']:04x}" if node.props["device_id"] <= 0xFFFF else None
        table_gfx, table_integrated = amd_device(device_id)
        runtime = a.runtime_target
        hw = (node.gfx_target if node else None) or table_gfx or runtime
        domain = node.props.get("domain", 0) if node else 0
        bus = bus_id_from_bdfid(a.bdfid, domain) or (node.pci_bus_id if node else None)
        notes: Tuple[str, ...] = ()
        if hw and runtime and hw != runtime:
            notes = (_note(hw, runtime, env),)
        mem = a.coarse_pool_kb * 1024 if a.coarse_pool_kb else None
        fam = a.family
        if fam is not None or (a.device_type and a.device_type.upper() != "GPU"):
            # A ROCm-family accelerator of another vendor: reported, with what PyTorch support it has.
            vendor = str(fam["vendor"]) if fam else (a.vendor_name or "unknown").split()[0].lower()
            out.append(GpuFacts(
                vendor=vendor, name=a.marketing_name or a.name, gfx_target=runtime,
                runtime_gfx_target=runtime,
                memory_bytes=mem, integrated=False, apis=("rocm",), pci_bus_id=bus, uuid=a.uuid,
                compute_units=a.compute_units, sources=("rocm",),
                notes=(str(fam["torch"]),) if fam else (f"rocminfo lists it as Device Type {a.device_type}",),
            ))
            continue
        out.append(GpuFacts(
            vendor="amd",
            name=a.marketing_name or (runtime and f"AMD {runtime}"),
            gfx_target=hw,
            runtime_gfx_target=runtime,
            memory_bytes=mem,
            integrated=_integrated(table_integrated, a.memory_properties),
            apis=("rocm",),
            architecture=architecture_of(hw),
            pci_bus_id=bus,
            pci_vendor_id="0x1002",
            pci_device_id=device_id,
            chip_id=device_id,
            uuid=a.uuid or (node.uuid if node else None),
            compute_units=a.compute_units or (node.compute_units if node else None),
            sources=("rocm",),
            notes=notes,
            kfd_node=a.node if a.node is not None else (node.node if node else None),
        ))
    return out


def gpus_from_kfd(kfd: List[KfdNode], env: Optional[str], rocm_installed: bool) -> List[GpuFacts]:
    """No rocminfo (often not on PATH: it lives in /opt/rocm/bin): the kernel's view of each GPU.
    The runtime would apply HSA_OVERRIDE_GFX_VERSION to every GPU, so that is its target."""
    out = []
    for n in kfd:
        if not n.is_gpu:
            continue
        did = n.props.get("device_id")
        device_id = f"0x{did:04x}" if did and did <= 0xFFFF else None
        table_gfx, table_integrated = amd_device(device_id)
        hw = n.gfx_target or table_gfx
        runtime = gfx_from_version(env) or hw
        notes: Tuple[str, ...] = ()
        if hw and runtime and hw != runtime:
            notes = (_note(hw, runtime, env),)
        out.append(GpuFacts(
            vendor="amd", gfx_target=hw, runtime_gfx_target=runtime, integrated=table_integrated,
            apis=("rocm",) if rocm_installed else (), architecture=architecture_of(hw),
            pci_bus_id=n.pci_bus_id, pci_vendor_id="0x1002", pci_device_id=device_id, chip_id=device_id,
            uuid=n.uuid, compute_units=n.compute_units, sources=("rocm",), notes=notes, kfd_node=n.node,
        ))
    return out


def gpus_from_smi(cards: List[SmiCard], env: Optional[str], rocm_installed: bool,
                  reported_first: bool = False) -> List[GpuFacts]:
    """rocm-smi or amd-smi alone. Both read the target from the KFD, so it is the hardware's;
    `reported_first`: amd-smi's TARGET_GRAPHICS_VERSION beats the PCI id table (rocm-smi's older
    `GFX Version` spellings do not)."""
    out = []
    for c in cards:
        table_gfx, table_integrated = amd_device(c.device_id, c.revision)
        hw = (c.gfx_target or table_gfx) if reported_first else (table_gfx or c.gfx_target)
        runtime = gfx_from_version(env) or hw
        notes: Tuple[str, ...] = ()
        if hw and runtime and hw != runtime:
            notes = (_note(hw, runtime, env),)
        uuid = None
        if c.unique_id and re.fullmatch(r"0x[0-9a-fA-F]{1,16}", c.unique_id):
            uuid = f"GPU-{int(c.unique_id, 16):016x}"
        out.append(GpuFacts(
            vendor="amd", name=c.name, gfx_target=hw, runtime_gfx_target=runtime, integrated=table_integrated,
            apis=("rocm",) if rocm_installed else (), architecture=architecture_of(hw), pci_bus_id=c.pci_bus_id,
            pci_vendor_id="0x1002", pci_device_id=c.device_id, chip_id=c.device_id, uuid=uuid,
            memory_bytes=None if table_integrated else c.memory_bytes, compute_units=c.compute_units,
            sources=("rocm",), notes=notes, kfd_node=c.node,
        ))
    return out


def _fill_from_smi(gpus: List[GpuFacts], cards: List[SmiCard]) -> List[GpuFacts]:
    """rocm-smi beside rocminfo: fill what rocminfo left empty (a name, a bus id), pairing by
    bus id, else in order among GPUs of the same device id."""
    from dataclasses import replace

    used: set[int] = set()
    out = []
    for g in gpus:
        match = None
        for i, c in enumerate(cards):
            if i in used:
                continue
            if g.pci_bus_id and c.pci_bus_id:
                if g.pci_bus_id == c.pci_bus_id:
                    match = i
                    break
                continue
            if c.device_id and c.device_id == g.pci_device_id:
                match = i
                break
        if match is None:
            out.append(g)
            continue
        used.add(match)
        c = cards[match]
        out.append(replace(g, name=g.name or c.name, pci_bus_id=g.pci_bus_id or c.pci_bus_id,
                           kfd_node=g.kfd_node if g.kfd_node is not None else c.node))
    return out


def probe(host: Host) -> Contribution:
    out = Contribution()
    errors: List[str] = []
    # rocminfo is the source; the others only fill in, so their parse failures are warnings.
    info = parse_capture(host, "rocminfo.txt", parse_rocminfo, errors)
    kfd = parse_capture(host, "kfd-topology.txt", parse_kfd_topology, errors, out.warnings) or []
    amd_smi = merge_cards(*(parse_capture(host, n, parse_amd_smi, errors, out.warnings) or [] for n in AMD_SMI))
    cards = amd_smi or parse_capture(host, "rocm-smi.txt", parse_rocm_smi, errors, out.warnings) or []
    version = parse_capture(host, "rocm-version.txt", parse_rocm_version, errors, out.warnings)
    seen_any = any(host.get(n).ok for n in
                   ("rocminfo.txt", "kfd-topology.txt", "rocm-smi.txt", "rocm-version.txt") + AMD_SMI)

    env = host.env("HSA_OVERRIDE_GFX_VERSION")
    env_gfx = gfx_from_version(env) if env else None
    if env and env_gfx is None:
        out.warnings.append(f"HSA_OVERRIDE_GFX_VERSION={env!r} is not a version like 10.3.0; ROCm ignores it")

    if info is not None and info.gpus:
        gpus = _fill_from_smi(gpus_from_rocminfo(info, kfd, env), cards)
    elif kfd and any(n.is_gpu for n in kfd):
        gpus = gpus_from_kfd(kfd, env if env_gfx else None, rocm_installed=version is not None)
    else:
        # amd-smi runs only where a ROCm user-space is installed (it is part of one).
        gpus = gpus_from_smi(cards, env if env_gfx else None, rocm_installed=version is not None or bool(amd_smi),
                             reported_first=bool(amd_smi))
    out.gpus = gpus
    if info is not None:
        # rocminfo lists the host CPU as an agent too ("Marketing Name: AMD Ryzen 9 7950X 16-Core Processor")
        out.cpu_hints = [CpuFacts(model=" ".join(str(a.marketing_name or a.name).split()), source="rocminfo.txt")
                         for a in info.agents if (a.device_type or "").upper() == "CPU" and (a.marketing_name or a.name)][:1]

    if not seen_any:
        return nothing_read(out, errors, "no ROCm (no rocminfo, no KFD topology, no amd-smi or rocm-smi, no /opt/rocm)")
    if info is None and not kfd and not cards and version is None:
        out.status = "error"
        out.error = "; ".join(errors + out.warnings)
        return out
    if info is not None:
        out.warnings.extend(f"rocminfo: {e}" for e in info.errors)
        if any("/dev/kfd" in e and "ermission" in e for e in info.errors):
            out.warnings.append("ROCm cannot open /dev/kfd as this user: add the user to the `render` and `video` "
                                "groups (sudo usermod -a -G render,video $LOGNAME), then log in again")

    in_effect = any(g.gfx_target and g.runtime_gfx_target and g.gfx_target != g.runtime_gfx_target for g in gpus)
    for g in gpus:
        if g.gfx_target and g.runtime_gfx_target and g.gfx_target != g.runtime_gfx_target:
            out.warnings.append(override_sentence(g.name, g.gfx_target, g.runtime_gfx_target))
    out.runtimes = Runtimes(rocm=RocmRuntime.of(
        version=version,
        hsa_override_gfx_version=env,
        override_in_effect=in_effect,
        hsa_runtime_version=info.runtime_version if info else None,
        rock_module_version=info.rock_module_version if info else None,
        wsl=info.wsl if info else None,
        gfx_targets=tuple(sorted({g.runtime_gfx_target for g in gpus if g.runtime_gfx_target})),
    ))
    if errors:
        out.warnings.extend(errors)
    return out


__all__ = [
    "AmdAgent",
    "KfdNode",
    "RocmInfo",
    "SmiCard",
    "amd_device",
    "architecture_of",
    "bus_id_from_bdfid",
    "gfx_from_version",
    "parse_amd_smi",
    "parse_kfd_topology",
    "parse_rocm_smi",
    "parse_rocm_version",
    "parse_rocminfo",
    "probe",
]
