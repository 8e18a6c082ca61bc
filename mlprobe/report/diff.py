"""What differs between two machines: reports (`mlprobe report`), scan JSONs (`mlprobe scan --json`)
or capture bundles (folders, or reports with an embedded bundle). Compares what decides whether a
stack runs: OS, CPU level and flags, GPUs (driver, compute capability, gfx target), runtimes,
frameworks and their flavours, Python, and the plan's top pick per framework."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from ..model.docversion import schema_id
from ..model.facts import CpuFacts, Facts, FrameworkFacts, GpuFacts, OsFacts, PythonFacts, ScanReport
from ..model.jsontypes import JsonObject, JsonValue
from ..model.plan import Plan, plan_of_report
from .markdown import plan_picks

GPU_FIELDS = (
    "name",
    "driver_version",
    "compute_capability",
    "gfx_target",
    "runtime_gfx_target",
    "architecture",
    "memory_bytes",
    "integrated",
    "apis",
    "mig_mode",
    "mig_devices",
    "metal_support",
    "driver_version_raw",
)
OS_FIELDS = ("system", "distro", "release", "wsl", "glibc", "macos_version", "windows_build")
CPU_FIELDS = ("vendor", "model", "arch", "cores", "threads", "x86_64_level")
PYTHON_FIELDS = ("version", "implementation", "in_venv", "externally_managed")


# What a difference shows on each side: a fact's value, a list of them joined, or nothing (None).
Leaf = Union[None, bool, int, float, str]


@dataclass(frozen=True)
class Side:
    """One machine of a diff: its facts and its plan (None: no plan to compare), read once from the
    report, scan JSON or bundle."""

    label: str
    scan: Facts
    plan: Optional[Plan]
    kind: str  # "report", "scan", "bundle"


@dataclass(frozen=True)
class Difference:
    section: str
    item: str
    a: Leaf
    b: Leaf

    def to_dict(self) -> JsonObject:
        return {"section": self.section, "item": self.item, "a": self.a, "b": self.b}


class DiffInputError(Exception):
    """An input that is none of: report, scan JSON, bundle folder."""


PlanFor = Callable[[Facts], Optional[Plan]]
ScanBundle = Callable[[Path], ScanReport]


def _bundle_side(p: Path, scan_bundle: ScanBundle, plan_for: PlanFor) -> Side:
    """A capture bundle (folder, or report with embedded captures), scanned and planned here."""
    from ..ui import display_path

    rep = scan_bundle(p)
    return Side(display_path(p), rep, plan_for(rep), "bundle")


def _label(p: Path) -> str:
    from ..ui import display_path

    return display_path(p)


def read_side(label: str, scan: JsonValue, plan: JsonValue, kind: str) -> Side:
    """One side from the JSON of its scan and plan (a report's `scan` and `plan`, or a scan JSON and
    no plan), read leniently: a value of the wrong type is unknown."""
    return Side(label, Facts.from_report(scan), plan_of_report(plan), kind)


def load_side(path: str, scan_bundle: ScanBundle, plan_for: PlanFor) -> Side:
    """One side of a diff. `scan_bundle` scans a bundle folder (raising DiffInputError when it is
    none), `plan_for` plans a scan that came without a plan (mlprobe.pipeline.diff_side gives both)."""
    p = Path(path)
    if p.is_dir():
        return _bundle_side(p, scan_bundle, plan_for)
    from ..scan.capture import UnreadableFile, read_regular
    from ..model import jsondoc
    from ..model.validate import MAX_DOCUMENT_BYTES

    try:
        raw = read_regular(p, MAX_DOCUMENT_BYTES + 1)
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise ValueError(f"it is larger than {MAX_DOCUMENT_BYTES >> 20} MiB")
        doc = jsondoc.loads(raw.decode("utf-8"))
    except jsondoc.BadNumber as exc:
        raise DiffInputError(f"{p}: {exc}") from None
    except (OSError, UnreadableFile, ValueError, RecursionError) as exc:
        raise DiffInputError(f"{p} is neither a bundle folder nor a readable JSON file: {exc}") from None
    from ..model.validate import DocumentError, check_document

    if isinstance(doc, dict) and ("scan" in doc or any(k in doc for k in ("cpu", "gpus", "os"))):
        try:
            check_document(doc, str(p))
        except DocumentError as exc:
            raise DiffInputError(str(exc)) from None
    elif isinstance(doc, dict):
        try:
            check_document({k: v for k, v in doc.items() if k in ("report_version", "schema")}, str(p))
        except DocumentError as exc:
            raise DiffInputError(str(exc)) from None
    if isinstance(doc, dict) and isinstance(doc.get("scan"), dict):
        return read_side(_label(p), doc["scan"], doc.get("plan"), "report")
    if isinstance(doc, dict) and any(k in doc for k in ("cpu", "gpus", "os")):
        facts = Facts.from_report(doc)
        return Side(_label(p), facts, plan_for(facts), "scan")
    if isinstance(doc, dict) and isinstance(doc.get("capture_bundle"), dict):
        return _bundle_side(p, scan_bundle, plan_for)
    raise DiffInputError(f"{p} is not an mlprobe report, scan JSON or capture bundle")


def _show(v: object) -> Leaf:
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


_Compared = Union[OsFacts, CpuFacts, GpuFacts, PythonFacts]


def _fields(section: str, a: _Compared, b: _Compared, fields: Tuple[str, ...], prefix: str = "") -> List[Difference]:
    """The named fields of two facts of one type that differ."""
    out = []
    for f in fields:
        va, vb = getattr(a, f, None), getattr(b, f, None)
        if va != vb:
            out.append(Difference(section, prefix + f, _show(va), _show(vb)))
    return out


def _flat(obj: JsonValue, prefix: str = "", depth: int = 0) -> Dict[str, Leaf]:
    """Leaf values of a runtime's JSON; lists of named things become their names."""
    if isinstance(obj, dict) and depth < 3:
        out: Dict[str, Leaf] = {}
        for k, v in obj.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k), depth + 1))
        return out
    if isinstance(obj, list):
        if obj and all(isinstance(x, dict) and "name" in x for x in obj):
            return {prefix: ", ".join(str(x["name"]) for x in obj if isinstance(x, dict))}
        if all(not isinstance(x, (dict, list)) for x in obj):
            return {prefix: ", ".join(str(x) for x in obj)}
        return {prefix: f"{len(obj)} entries"}
    if isinstance(obj, dict):
        return {prefix: json.dumps(obj, sort_keys=True)}
    return {prefix: obj}


def _pair_gpus(a: Sequence[GpuFacts], b: Sequence[GpuFacts]) -> List[Tuple[Optional[int], Optional[int]]]:
    pairs: List[Tuple[Optional[int], Optional[int]]] = []
    used: Set[int] = set()

    def key(g: GpuFacts) -> Tuple[str, str]:
        return (str(g.vendor), str(g.name).lower())

    for i, ga in enumerate(a):  # same vendor and name first, then same vendor, in order
        j = next((j for j, gb in enumerate(b) if j not in used and key(gb) == key(ga)), None)
        if j is None:
            j = next((j for j, gb in enumerate(b) if j not in used and gb.vendor == ga.vendor), None)
        if j is not None:
            used.add(j)
        pairs.append((i, j))
    pairs += [(None, j) for j in range(len(b)) if j not in used]
    return pairs


def diff_sides(a: Side, b: Side) -> List[Difference]:
    """Every difference that matters for choosing a stack."""
    sa, sb = a.scan, b.scan
    out: List[Difference] = []
    # Facts set by MLPROBE_OVERRIDE_* on either side are not the hardware: the overrides are listed
    # as such, and the facts they set are not compared.
    oa, ob = sa.overrides, sb.overrides
    for key in sorted(set(oa) | set(ob)):
        if oa.get(key) != ob.get(key):
            out.append(Difference("overrides", key, oa.get(key), ob.get(key)))
    flags_overridden = "MLPROBE_OVERRIDE_CPU_FLAGS" in oa or "MLPROBE_OVERRIDE_CPU_FLAGS" in ob
    python_overridden = "MLPROBE_OVERRIDE_PYTHON_VERSION" in oa or "MLPROBE_OVERRIDE_PYTHON_VERSION" in ob
    out += _fields("os", sa.os, sb.os, OS_FIELDS)
    cpu_fields = tuple(f for f in CPU_FIELDS if not (flags_overridden and f == "x86_64_level"))
    out += _fields("cpu", sa.cpu, sb.cpu, cpu_fields)
    fa, fb = set(sa.cpu.flags), set(sb.cpu.flags)
    if fa - fb and not flags_overridden:
        out.append(Difference("cpu", "flags only in A", " ".join(sorted(fa - fb)), None))
    if fb - fa and not flags_overridden:
        out.append(Difference("cpu", "flags only in B", None, " ".join(sorted(fb - fa))))
    ga, gb = sa.gpus, sb.gpus
    if len(ga) != len(gb):
        out.append(Difference("gpus", "count", len(ga), len(gb)))
    for i, j in _pair_gpus(ga, gb):
        if i is not None and j is not None:
            label = f"gpu {i}" if i == j else f"gpu {i}/{j}"
            out += _fields("gpus", ga[i], gb[j], GPU_FIELDS, prefix=f"{label} ")
        elif i is not None:
            out.append(Difference("gpus", f"gpu {i} only in A", ga[i].name or ga[i].vendor, None))
        elif j is not None:
            out.append(Difference("gpus", f"gpu {j} only in B", None, gb[j].name or gb[j].vendor))
    ra, rb = sa.runtimes.to_dict(), sb.runtimes.to_dict()  # each runtime's keys as the scan wrote them
    for key in sorted(set(ra) | set(rb)):
        xa, xb = _flat(ra.get(key), key), _flat(rb.get(key), key)
        for leaf in sorted(set(xa) | set(xb)):
            if xa.get(leaf) != xb.get(leaf):
                out.append(Difference("runtimes", leaf, xa.get(leaf), xb.get(leaf)))
    fwa = {f.name: f for f in sa.frameworks if f.name}
    fwb = {f.name: f for f in sb.frameworks if f.name}
    for name in sorted(set(fwa) | set(fwb)):
        va = _fw(fwa.get(name))
        vb = _fw(fwb.get(name))
        if va != vb:
            out.append(Difference("frameworks", name, va, vb))
    py_fields = tuple(f for f in PYTHON_FIELDS if not (python_overridden and f == "version"))
    out += _fields("python", sa.python, sb.python, py_fields)
    pa, pb = dict(plan_picks(a.plan)), dict(plan_picks(b.plan))
    for fw in sorted(set(pa) | set(pb)):
        if pa.get(fw) != pb.get(fw):
            out.append(Difference("plan", f"top pick for {fw}", pa.get(fw), pb.get(fw)))
    return out


def _fw(f: Optional[FrameworkFacts]) -> Optional[str]:
    if f is None:
        return None
    s = str(f.version or "?")
    if f.flavour:
        s += f" ({f.flavour})"
    return s


def diff_document(a: Side, b: Side, diffs: List[Difference]) -> JsonObject:
    """`mlprobe diff --json`."""
    return {
        "schema": schema_id("diff"),
        "a": {"path": a.label, "kind": a.kind},
        "b": {"path": b.label, "kind": b.kind},
        "same": not diffs,
        "differences": [d.to_dict() for d in diffs],
        "compared": ["overrides", "os", "cpu", "gpus", "runtimes", "frameworks", "python", "plan"],
        "plan_compared": a.plan is not None and b.plan is not None,
    }


def render_table(a: Side, b: Side, diffs: List[Difference], total: int = 100) -> str:
    """A plain-text table (no colour codes), readable in a terminal and in a ticket, no wider than
    `total` columns; where the two sides would get less than 16 columns each, one block per
    difference instead."""
    if not diffs:
        return (
            f"A = {a.label}\nB = {b.label}\n"
            "no differences in OS, CPU, GPUs, runtimes, frameworks, Python or plan\n"
        )

    from ..ui import safe_line

    def cell(item: str, v: Leaf) -> str:
        if v is None:
            return "—"
        if item.endswith("memory_bytes") and isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return f"{v / 1024**3:.1f} GiB"
        return safe_line(v)  # from a capture: control characters shown escaped

    rows = [("section", "what", "A", "B")] + [
        (d.section, safe_line(d.item), cell(d.item, d.a), cell(d.item, d.b)) for d in diffs
    ]
    width = [min(max(len(r[i]) for r in rows), 48 if i >= 2 else 32) for i in range(4)]
    side = min(48, (total - width[0] - width[1] - 6) // 2)
    lines = [f"A = {safe_line(a.label)}", f"B = {safe_line(b.label)}", ""]
    if side < 16:
        for r in rows[1:]:
            lines.append(f"{r[0]} {r[1]}")
            for name, value in (("A", r[2]), ("B", r[3])):
                lines.extend(textwrap.wrap(value, total - 4, break_on_hyphens=False, initial_indent=f"  {name}: ",
                                           subsequent_indent="      ") or [f"  {name}:"])
        rows = []
    width[2] = min(width[2], side)
    width[3] = min(width[3], side)
    for k, r in enumerate(rows):
        cells = [textwrap.wrap(c, width[i], break_on_hyphens=False) or [""] for i, c in enumerate(r)]
        for n in range(max(len(c) for c in cells)):
            lines.append(
                "  ".join((c[n] if n < len(c) else "").ljust(width[i]) for i, c in enumerate(cells)).rstrip()
            )
        if k == 0:
            lines.append("  ".join("-" * w for w in width))
    if a.plan is None or b.plan is None:
        lines.append("")
        lines.append(
            "(plan top picks not compared: no plan for "
            + " and ".join(s.label for s in (a, b) if s.plan is None)
            + ")"
        )
    return "\n".join(lines) + "\n"
