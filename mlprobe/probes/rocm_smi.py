"""rocm-smi and amd-smi (its successor; text and --json): each card's identity (series, model, device id,
gfx, PCI bus, unique id), merged across the tools, and ROCm's own version file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ParseError
from ..model.hw.amd import GFX_NAME
from ._util import clean_lines


def _norm_smi_gfx(value: str) -> Optional[str]:
    """rocm-smi's `GFX Version`: 'gfx1100', or older releases' 'gfx11000' / 'gfx11003' (= 11.0.3)."""
    s = value.strip().lower()
    m = re.fullmatch(r"gfx(\d{2})(\d)(\d{2})", s)
    if m:
        return f"gfx{int(m.group(1))}{int(m.group(2)):x}{int(m.group(3)):x}"
    return s if GFX_NAME.match(s) else None


_INT = re.compile(r"^\s*(\d+)")


def _int(v: str) -> Optional[int]:
    m = _INT.match(v)
    return int(m.group(1)) if m else None


# -- rocm-smi ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmiCard:
    index: int
    name: Optional[str] = None  # "Card Series" / the concise table's name row
    device_id: Optional[str] = None  # "0x74a1"
    revision: Optional[str] = None
    node: Optional[int] = None
    gfx_target: Optional[str] = None
    unique_id: Optional[str] = None
    pci_bus_id: Optional[str] = None
    memory_bytes: Optional[int] = None  # amd-smi's VRAM SIZE
    compute_units: Optional[int] = None


_SMI_IDENTITY = ("card series", "card model", "card vendor", "card sku", "device id", "gfx version", "pci bus",
                 "unique id", "node id", "device rev")


def parse_rocm_smi(text: str) -> List[SmiCard]:
    """`rocm-smi --showproductname` / `rocm-smi -a` (`GPU[0] : Key: value`) or plain `rocm-smi`."""
    from ..model.vendors import hex_id, normalise_bus_id

    lines = clean_lines(text)
    cards: Dict[int, Dict[str, str]] = {}
    order: List[int] = []
    recognised = False
    for line in lines:
        m = re.match(r"^\s*GPU\[(\d+)\]\s*:\s*(.*?)\s*$", line)
        if not m:
            continue
        recognised = True
        idx, rest = int(m.group(1)), m.group(2)
        kv = re.match(r"^([A-Za-z][A-Za-z0-9 ()/_.-]*?)\s*:\s*(.*)$", rest)
        if idx not in cards:
            cards[idx] = {}
            order.append(idx)
        if kv:
            cards[idx].setdefault(kv.group(1).strip().lower(), kv.group(2).strip())
    table_rows = _smi_concise(lines)
    if table_rows:
        recognised = True
        for idx, did, name in table_rows:
            if idx not in cards:
                cards[idx] = {}
                order.append(idx)
            if did:
                cards[idx].setdefault("card model", did)
            if name:
                cards[idx].setdefault("card series", name)
    if not recognised:
        if re.search(r"ROCm System Management Interface|ROCm SMI|rocm-smi|amdgpu", text, re.IGNORECASE):
            return []  # rocm-smi ran but listed no GPU (e.g. "Driver not initialized")
        raise ParseError("not rocm-smi output (no GPU[n] lines, no device table)")
    out = []
    for idx in order:
        c = cards[idx]
        if sum(1 for k in _SMI_IDENTITY if c.get(k)) < 2:
            continue  # a lone line (e.g. a temperature reading) names no card
        series = c.get("card series") or None
        if series and re.fullmatch(r"0x[0-9a-fA-F]{4}", series):
            series = None  # unknown to rocm-smi's name table: it prints the id again
        gfx = _norm_smi_gfx(c["gfx version"]) if c.get("gfx version") else None
        out.append(SmiCard(
            index=idx,
            name=series,
            device_id=hex_id(c.get("card model") or c.get("device id")),
            revision=_revision(c.get("device rev")),
            node=_int(c.get("node id", "")),
            gfx_target=gfx,
            unique_id=c.get("unique id") or None,
            pci_bus_id=normalise_bus_id(c.get("pci bus")),
        ))
    return out


def _revision(v: Optional[str]) -> Optional[str]:
    m = re.fullmatch(r"\s*0x([0-9a-fA-F]{1,2})\s*", v or "")
    return f"0x{int(m.group(1), 16):02x}" if m else None


def _smi_concise(lines: List[str]) -> List[Tuple[int, Optional[str], Optional[str]]]:
    """Rows of the plain `rocm-smi` table. ROCm 6.x: `0  1  0x744c, 21373  ...`; the MI300 layout:
    `0  [0x74a1 : 0x00]  ...` with the name ("Name (20 chars)") on the next line."""
    if not any(re.match(r"^\s*(Device|GPU)\b.*\b(Temp|SCLK|Power)", ln) for ln in lines):
        return []
    names_on_next_line = any("Name (20 chars)" in ln for ln in lines)
    rows: List[Tuple[int, Optional[str], Optional[str]]] = []
    seen: set[int] = set()
    for i, ln in enumerate(lines):
        m = re.match(r"^(\d{1,3})\s{2,}(.*)$", ln)
        # a device row has many columns and readings (%, W, Mhz, ids); a name row has none
        if not m or len(ln.split()) < 6 or not re.search(r"%|\dW\b|Mhz|0x[0-9a-fA-F]{4}", m.group(2)):
            continue
        idx = int(m.group(1))
        if idx in seen:
            continue
        seen.add(idx)
        dm = re.search(r"0x([0-9a-fA-F]{4})\b", m.group(2))
        name = None
        if names_on_next_line and i + 1 < len(lines):
            nxt = lines[i + 1]
            if re.match(r"^\s{4,}\S", nxt) and not re.match(r"^\s*\d", nxt) and "=" not in nxt:
                name = nxt.strip() or None
        rows.append((idx, f"0x{dm.group(1).lower()}" if dm else None, name))
    return rows


# -- amd-smi ------------------------------------------------------------------------------------

_AMDSMI_GPU = re.compile(r"^GPU:\s*(\d+)\s*$")
_AMDSMI_KV = re.compile(r"^([A-Z][A-Z0-9_ ]*?):\s*(.*?)\s*$")


def _amdsmi_text(text: str) -> Dict[int, Dict[str, Any]]:
    """`amd-smi list` / `amd-smi static` text: `GPU: N` blocks of `KEY: value` lines, nested by
    indentation (ASIC:, BUS:, VRAM:, ...)."""
    gpus: Dict[int, Dict[str, Any]] = {}
    cur: Optional[Dict[str, Any]] = None
    stack: List[Tuple[int, Dict[str, Any]]] = []
    for line in clean_lines(text):
        if not line.strip():
            continue
        m = _AMDSMI_GPU.match(line.strip()) if not line[:1].isspace() else None
        if m:
            cur = gpus.setdefault(int(m.group(1)), {})
            stack = [(-1, cur)]
            continue
        if cur is None:
            continue
        indent = len(line) - len(line.lstrip(" "))
        kv = _AMDSMI_KV.match(line.strip())
        if not kv:
            continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        key, value = kv.group(1).strip(), kv.group(2)
        parent = stack[-1][1]
        if value == "":
            child: Dict[str, Any] = {}
            parent.setdefault(key, child)
            stack.append((indent, parent[key] if isinstance(parent[key], dict) else child))
        else:
            parent.setdefault(key, value)
    return gpus


def _upper(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k).upper(): _upper(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_upper(v) for v in obj]
    return obj


def _amdsmi_json(text: str) -> Dict[int, Dict[str, Any]]:
    """`amd-smi list --json` / `amd-smi static --json`: a list of objects with a `gpu` index and
    the text form's keys in lower case (`asic`, `target_graphics_version`); sizes are
    {"value": N, "unit": "MB"}."""
    import json

    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"amd-smi --json output is not JSON: {exc}") from None
    if isinstance(doc, dict):  # one GPU, or a wrapper holding the list
        lists = [v for v in doc.values() if isinstance(v, list)]
        doc = lists[0] if "gpu" not in doc and len(lists) == 1 else [doc]
    if not isinstance(doc, list):
        raise ParseError("amd-smi --json output is not a list of GPUs")
    out: Dict[int, Dict[str, Any]] = {}
    for pos, item in enumerate(doc):
        if not isinstance(item, dict):
            continue
        g = _upper(item)
        idx = g.get("GPU", pos)
        out.setdefault(idx if isinstance(idx, int) and not isinstance(idx, bool) else pos, g)
    return out


def _val(v: Any) -> Optional[str]:
    if isinstance(v, dict) and "VALUE" in v:
        unit = v.get("UNIT")
        v = f"{v['VALUE']} {unit}" if unit else v["VALUE"]
    if v is None or isinstance(v, (dict, list)):
        return None
    s = str(v).strip()
    return None if not s or s.upper() in ("N/A", "NA", "NONE", "UNKNOWN") else s


def _mib_bytes(v: Optional[str]) -> Optional[int]:
    m = re.fullmatch(r"(\d+)\s*(MB|MiB|GB|GiB)?", v or "")
    if not m:
        return None
    n = int(m.group(1))
    return n * (1024 ** 3 if (m.group(2) or "MB").startswith("G") else 1024 ** 2)


def _section(g: Dict[str, Any], key: str) -> Dict[str, Any]:
    v = g.get(key)
    return v if isinstance(v, dict) else {}


def _amdsmi_unique_id(g: Dict[str, Any]) -> Optional[str]:
    """ROCm's 64-bit unique id, the `GPU-<16 hex>` of rocminfo: the ASIC serial, else the HIP_UUID,
    else the id inside amd-smi's UUID (aabbdddd-0000-1000-80cc-eeeeeeeeeeee -> aacc eeeeeeeeeeee, as
    the AMD blog's MI300X and MI325X outputs show). All zeros (APUs) is no id."""
    serial = _val(_section(g, "ASIC").get("ASIC_SERIAL"))
    hexid = None
    if serial and re.fullmatch(r"0x[0-9a-fA-F]{16}", serial):
        hexid = serial[2:].lower()
    hip = _val(g.get("HIP_UUID"))
    if hexid is None and hip and re.fullmatch(r"GPU-[0-9a-fA-F]{16}", hip):
        hexid = hip[4:].lower()
    uuid = _val(g.get("UUID"))
    m = re.fullmatch(r"([0-9a-f]{2})[0-9a-f]{6}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{2}([0-9a-f]{2})-([0-9a-f]{12})",
                     (uuid or "").lower())
    if hexid is None and m:
        hexid = m.group(1) + m.group(2) + m.group(3)
    return f"0x{hexid}" if hexid and int(hexid, 16) else None


def parse_amd_smi(text: str) -> List[SmiCard]:
    """`amd-smi list` or `amd-smi static` (text or --json) -> one card per `GPU: N`. The target
    (TARGET_GRAPHICS_VERSION) is read from the KFD, so it is the hardware's own; NODE_ID is the KFD node."""
    from ..model.vendors import hex_id, normalise_bus_id

    s = text.lstrip()
    if s.startswith("[") or s.startswith("{"):
        gpus = _amdsmi_json(text)
    else:
        gpus = _amdsmi_text(text)
        if not gpus:
            if re.search(r"amd-?smi|AMDSMI|No GPUs? (were )?found", text, re.IGNORECASE):
                return []
            raise ParseError("not amd-smi output (no `GPU: N` blocks)")
    out = []
    for idx in sorted(gpus):
        g = gpus[idx]
        asic, bus, vram = _section(g, "ASIC"), _section(g, "BUS"), _section(g, "VRAM")
        gfx = _val(asic.get("TARGET_GRAPHICS_VERSION"))
        node = _val(g.get("NODE_ID")) or _val(g.get("HSA_ID"))
        cu = _val(asic.get("NUM_COMPUTE_UNITS"))
        out.append(SmiCard(
            index=idx,
            name=_val(asic.get("MARKET_NAME")),
            device_id=hex_id(_val(asic.get("DEVICE_ID"))),
            revision=_revision(_val(asic.get("REV_ID"))),
            node=int(node) if node and node.isdigit() else None,
            gfx_target=gfx.lower() if gfx and GFX_NAME.match(gfx.lower()) else None,
            unique_id=_amdsmi_unique_id(g),
            pci_bus_id=normalise_bus_id(_val(g.get("BDF")) or _val(bus.get("BDF"))),
            memory_bytes=_mib_bytes(_val(vram.get("SIZE"))),
            compute_units=int(cu) if cu and cu.isdigit() else None,
        ))
    # a block that names nothing (an empty JSON object, a `GPU: N` line alone) is no GPU
    return [c for c in out if c.name or c.device_id or c.pci_bus_id or c.gfx_target or c.unique_id
            or c.node is not None]


def merge_cards(*lists: List[SmiCard]) -> List[SmiCard]:
    """amd-smi list + static (+ their --json forms): one card per GPU index, the first value of each field."""
    from dataclasses import fields, replace

    by: Dict[int, SmiCard] = {}
    for cards in lists:
        for c in cards:
            have = by.get(c.index)
            if have is None:
                by[c.index] = c
                continue
            fill = {f.name: getattr(c, f.name) for f in fields(SmiCard)
                    if getattr(have, f.name) is None and getattr(c, f.name) is not None}
            by[c.index] = replace(have, **fill)
    return [by[i] for i in sorted(by)]


def parse_rocm_version(text: str) -> str:
    """/opt/rocm/.info/version: '6.2.4-120' -> '6.2.4'."""
    for line in clean_lines(text):
        m = re.match(r"^\s*(\d+\.\d+(?:\.\d+)?)", line)
        if m:
            return m.group(1)
    raise ParseError("no version number in /opt/rocm/.info/version")
