"""What differs between two machines: reports (`mlprobe report`), scan JSONs (`mlprobe scan --json`)
or capture bundles (folders, or reports with an embedded bundle). Compares what decides whether a
stack runs: OS, CPU level and flags, GPUs (driver, compute capability, gfx target), runtimes,
frameworks and their flavours, Python, and the plan's top pick per framework."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..model.facts import Facts, ScanReport
from ..model.plan import Plan
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


@dataclass(frozen=True)
class Side:
    label: str
    scan: Dict[str, Any]
    plan: Optional[Dict[str, Any]]
    kind: str  # "report", "scan", "bundle"


@dataclass(frozen=True)
class Difference:
    section: str
    item: str
    a: Any
    b: Any

    def to_dict(self) -> Dict[str, Any]:
        return {"section": self.section, "item": self.item, "a": self.a, "b": self.b}


class DiffInputError(Exception):
    """An input that is none of: report, scan JSON, bundle folder."""


PlanFor = Callable[[Facts], Optional[Plan]]
ScanBundle = Callable[[Path], ScanReport]


def _planned(facts: Facts, plan_for: PlanFor) -> Optional[Dict[str, Any]]:
    plan = plan_for(facts)
    return plan.to_json() if plan is not None else None


def _bundle_side(p: Path, scan_bundle: ScanBundle, plan_for: PlanFor) -> Side:
    """A capture bundle (folder, or report with embedded captures), scanned and planned here."""
    from ..ui import display_path

    rep = scan_bundle(p)
    return Side(display_path(p), rep.to_json(), _planned(rep, plan_for), "bundle")


def _label(p: Path) -> str:
    from ..ui import display_path

    return display_path(p)


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
            check_document({k: v for k, v in doc.items() if k == "report_version"}, str(p))
        except DocumentError as exc:
            raise DiffInputError(str(exc)) from None
    if isinstance(doc, dict) and isinstance(doc.get("scan"), dict):
        plan = doc.get("plan") if isinstance(doc.get("plan"), dict) else None
        if plan is not None and plan.get("available") is False:
            plan = None
        return Side(_label(p), doc["scan"], plan, "report")
    if isinstance(doc, dict) and any(k in doc for k in ("cpu", "gpus", "os")):
        return Side(_label(p), doc, _planned(Facts.from_report(doc), plan_for), "scan")
    if isinstance(doc, dict) and isinstance(doc.get("capture_bundle"), dict):
        return _bundle_side(p, scan_bundle, plan_for)
    raise DiffInputError(f"{p} is not an mlprobe report, scan JSON or capture bundle")


def _show(v: Any) -> Any:
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return v


def _fields(
    section: str, a: Dict[str, Any], b: Dict[str, Any], fields: Tuple[str, ...], prefix: str = ""
) -> List[Difference]:
    out = []
    for f in fields:
        va, vb = a.get(f), b.get(f)
        if va != vb:
            out.append(Difference(section, prefix + f, _show(va), _show(vb)))
    return out


def _flat(obj: Any, prefix: str = "", depth: int = 0) -> Dict[str, Any]:
    """Leaf values of a runtimes entry; lists of named things become their names."""
    if isinstance(obj, dict) and depth < 3:
        out: Dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k), depth + 1))
        return out
    if isinstance(obj, list):
        if obj and all(isinstance(x, dict) and "name" in x for x in obj):
            return {prefix: ", ".join(str(x["name"]) for x in obj)}
        if all(not isinstance(x, (dict, list)) for x in obj):
            return {prefix: ", ".join(str(x) for x in obj)}
        return {prefix: f"{len(obj)} entries"}
    if isinstance(obj, dict):
        return {prefix: json.dumps(obj, sort_keys=True)}
    return {prefix: obj}


def _pair_gpus(a: List[Dict[str, Any]], b: List[Dict[str, Any]]) -> List[Tuple[Optional[int], Optional[int]]]:
    pairs: List[Tuple[Optional[int], Optional[int]]] = []
    used: Set[int] = set()

    def key(g: Dict[str, Any]) -> Tuple[str, str]:
        return (str(g.get("vendor")), str(g.get("name")).lower())

    for i, ga in enumerate(a):  # same vendor and name first, then same vendor, in order
        j = next((j for j, gb in enumerate(b) if j not in used and key(gb) == key(ga)), None)
        if j is None:
            j = next(
                (j for j, gb in enumerate(b) if j not in used and gb.get("vendor") == ga.get("vendor")), None
            )
        if j is not None:
            used.add(j)
        pairs.append((i, j))
    pairs += [(None, j) for j in range(len(b)) if j not in used]
    return pairs


def _d(v: Any) -> Dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> List[Any]:
    return v if isinstance(v, list) else []


def _hashable(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool)) or v is None else json.dumps(v, sort_keys=True)


def diff_sides(a: Side, b: Side) -> List[Difference]:
    """Every difference that matters for choosing a stack. Tolerates any JSON shape."""
    sa, sb = _d(a.scan), _d(b.scan)
    out: List[Difference] = []
    # Facts set by MLPROBE_OVERRIDE_* on either side are not the hardware: the overrides are listed
    # as such, and the facts they set are not compared.
    oa, ob = _d(sa.get("overrides")), _d(sb.get("overrides"))
    for key in sorted(set(oa) | set(ob)):
        if oa.get(key) != ob.get(key):
            out.append(Difference("overrides", key, oa.get(key), ob.get(key)))
    flags_overridden = "MLPROBE_OVERRIDE_CPU_FLAGS" in oa or "MLPROBE_OVERRIDE_CPU_FLAGS" in ob
    python_overridden = "MLPROBE_OVERRIDE_PYTHON_VERSION" in oa or "MLPROBE_OVERRIDE_PYTHON_VERSION" in ob
    out += _fields("os", _d(sa.get("os")), _d(sb.get("os")), OS_FIELDS)
    ca, cb = _d(sa.get("cpu")), _d(sb.get("cpu"))
    cpu_fields = tuple(f for f in CPU_FIELDS if not (flags_overridden and f == "x86_64_level"))
    out += _fields("cpu", ca, cb, cpu_fields)
    fa = {str(_hashable(f)) for f in _l(ca.get("flags"))}
    fb = {str(_hashable(f)) for f in _l(cb.get("flags"))}
    if fa - fb and not flags_overridden:
        out.append(Difference("cpu", "flags only in A", " ".join(sorted(fa - fb)), None))
    if fb - fa and not flags_overridden:
        out.append(Difference("cpu", "flags only in B", None, " ".join(sorted(fb - fa))))
    ga = [g for g in _l(sa.get("gpus")) if isinstance(g, dict)]
    gb = [g for g in _l(sb.get("gpus")) if isinstance(g, dict)]
    if len(ga) != len(gb):
        out.append(Difference("gpus", "count", len(ga), len(gb)))
    for i, j in _pair_gpus(ga, gb):
        if i is not None and j is not None:
            label = f"gpu {i}" if i == j else f"gpu {i}/{j}"
            out += _fields("gpus", ga[i], gb[j], GPU_FIELDS, prefix=f"{label} ")
        elif i is not None:
            out.append(
                Difference("gpus", f"gpu {i} only in A", ga[i].get("name") or ga[i].get("vendor"), None)
            )
        elif j is not None:
            out.append(
                Difference("gpus", f"gpu {j} only in B", None, gb[j].get("name") or gb[j].get("vendor"))
            )
    ra, rb = _d(sa.get("runtimes")), _d(sb.get("runtimes"))
    for key in sorted(set(ra) | set(rb)):
        xa, xb = _flat(ra.get(key), key), _flat(rb.get(key), key)
        for leaf in sorted(set(xa) | set(xb)):
            if xa.get(leaf) != xb.get(leaf):
                out.append(Difference("runtimes", leaf, xa.get(leaf), xb.get(leaf)))
    fwa = {str(f["name"]): f for f in _l(sa.get("frameworks")) if isinstance(f, dict) and f.get("name")}
    fwb = {str(f["name"]): f for f in _l(sb.get("frameworks")) if isinstance(f, dict) and f.get("name")}
    for name in sorted(set(fwa) | set(fwb)):
        va = _fw(fwa.get(name))
        vb = _fw(fwb.get(name))
        if va != vb:
            out.append(Difference("frameworks", name, va, vb))
    py_fields = tuple(f for f in PYTHON_FIELDS if not (python_overridden and f == "version"))
    out += _fields("python", _d(sa.get("python")), _d(sb.get("python")), py_fields)
    pa, pb = dict(plan_picks(a.plan)), dict(plan_picks(b.plan))
    for fw in sorted(set(pa) | set(pb)):
        if pa.get(fw) != pb.get(fw):
            out.append(Difference("plan", f"top pick for {fw}", pa.get(fw), pb.get(fw)))
    return out


def _fw(f: Optional[Dict[str, Any]]) -> Optional[str]:
    if not f:
        return None
    s = str(f.get("version") or "?")
    if f.get("flavour"):
        s += f" ({f['flavour']})"
    return s


def diff_document(a: Side, b: Side, diffs: List[Difference]) -> Dict[str, Any]:
    return {
        "diff_version": 1,
        "a": {"path": a.label, "kind": a.kind},
        "b": {"path": b.label, "kind": b.kind},
        "same": not diffs,
        "differences": [d.to_dict() for d in diffs],
        "compared": ["overrides", "os", "cpu", "gpus", "runtimes", "frameworks", "python", "plan"],
        "plan_compared": a.plan is not None and b.plan is not None,
    }


def render_table(a: Side, b: Side, diffs: List[Difference]) -> str:
    """A plain-text table (no colour codes), readable in a terminal and in a ticket."""
    if not diffs:
        return (
            f"A = {a.label}\nB = {b.label}\n"
            "no differences in OS, CPU, GPUs, runtimes, frameworks, Python or plan\n"
        )

    from ..ui import safe_line

    def cell(item: str, v: Any) -> str:
        if v is None:
            return "—"
        if item.endswith("memory_bytes") and isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return f"{v / 1024**3:.1f} GiB"
        return safe_line(v)  # from a capture: control characters shown escaped

    rows = [("section", "what", "A", "B")] + [
        (d.section, safe_line(d.item), cell(d.item, d.a), cell(d.item, d.b)) for d in diffs
    ]
    width = [min(max(len(r[i]) for r in rows), 48 if i >= 2 else 32) for i in range(4)]
    lines = [f"A = {safe_line(a.label)}", f"B = {safe_line(b.label)}", ""]
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
