"""A small, pure condition evaluator: facts + recipe -> Verdict, every "no" a sentence.

Conditions are data (see mlprobe/recipes/recipe.schema.json):

    {"all": [c, ...]}   {"any": [c, ...], "because": "..."}   {"not": c, "because": "..."}
    {"fact": "cpu.flags", "contains": "avx", "because": "..."}
    {"fact": "os.system", "in": ["Linux", "Windows"]}       ("equals", "gte", "lte", "gt", "lt")
    {"fact": "python.version", "specifier": ">=3.10,<3.15"}  (PEP 440, through packaging)
    {"test": "cuda_archs_cover", "archs": "{row.archs}"}     (a named predicate over sourced tables)

Logic is three-valued: a fact the scan could not read is unknown (None), never a silent yes or no.
An unknown condition does not reject a recipe; it becomes a warning saying what could not be
checked. `because` and `unknown` are sentence templates; `{a.b}` reads the facts, `{row.x}` the
knowledge-table row being tried, `{value}` the fact's value.

`derive_facts(report)` turns a scan report (mlprobe.scan.facts_to_report) into the flat context the
conditions read. Nothing here does I/O: knowledge tables come in as a dict (mlprobe.recipes.knowledge).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

Kb = Mapping[str, Any]  # knowledge tables by file stem: {"torch_wheels": {...}, ...}
Ctx = Dict[str, Any]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")


@dataclass
class Outcome:
    value: Optional[bool]  # True fits, False rejects, None unknown
    reasons: List[str] = field(default_factory=list)  # why not (when False)
    warnings: List[str] = field(default_factory=list)  # caveats, and what could not be checked
    effects: Dict[str, Any] = field(default_factory=dict)  # env vars, chosen device, speed hints
    tags: List[str] = field(default_factory=list)  # e.g. "compat" (CUDA minor-version compatibility)
    vars: Dict[str, Any] = field(default_factory=dict)  # extra {names} for the condition's `because`
    unknown: List[str] = field(default_factory=list)  # what could not be checked (facts not in the scan)


@dataclass
class Verdict:
    recipe: str
    fits: bool
    reasons: List[str]
    warnings: List[str]
    row: Optional[Dict[str, Any]] = None  # the knowledge row (variant) chosen
    effects: Dict[str, Any] = field(default_factory=dict)
    unknown: List[str] = field(default_factory=list)  # what could not be checked
    newer_rejected: bool = False  # a newer row of the table did not fit: pin the version
    variants: List[Dict[str, Any]] = field(default_factory=list)  # every row tried: label, fits, reasons


# --------------------------------------------------------------------------- values and templates


def lookup(ctx: Ctx, path: str, row: Optional[Dict[str, Any]] = None) -> Any:
    parts = path.split(".")
    if parts[0] == "row":
        cur: Any = row or {}
        parts = parts[1:]
    else:
        cur = ctx
    for p in parts:
        if isinstance(cur, dict):
            cur = cur.get(p)
        else:
            return None
        if cur is None:
            return None
    return cur


def _show(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple, set)):
        return ", ".join(_show(v) for v in value) if value else "none"
    return str(value)


def fmt(template: str, ctx: Ctx, row: Optional[Dict[str, Any]] = None, **extra: Any) -> str:
    def sub(m: "re.Match[str]") -> str:
        key = m.group(1)
        if key in extra:
            return _show(extra[key])
        return _show(lookup(ctx, key, row))

    return _PLACEHOLDER.sub(sub, template)


def resolve(value: Any, ctx: Ctx, row: Optional[Dict[str, Any]] = None) -> Any:
    """A condition operand: "{row.os}" alone gives the raw value (a list stays a list)."""
    if isinstance(value, str):
        m = _PLACEHOLDER.fullmatch(value)
        if m:
            return lookup(ctx, m.group(1), row)
        if "{" in value:
            return fmt(value, ctx, row)
    return value


@lru_cache(maxsize=512)
def _spec(text: str) -> SpecifierSet:
    return SpecifierSet(text)


def version(text: Any) -> Optional[Version]:
    if text is None:
        return None
    return _version(str(text))


@lru_cache(maxsize=1024)
def _version(text: str) -> Optional[Version]:
    try:
        return Version(str(text))
    except InvalidVersion:
        m = re.match(r"^\s*(\d+(?:\.\d+)*)", str(text))
        return Version(m.group(1)) if m else None


def cc_tuple(text: str) -> Tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(re.sub(r"\D.*$", "", minor) or 0)


# --------------------------------------------------------------------------- combinators and leaves


def evaluate(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]] = None) -> Outcome:
    if "all" in cond:
        parts = []
        for c in cond["all"]:
            parts.append(evaluate(c, ctx, kb, row))
            if parts[-1].value is False and c.get("stop"):
                break  # a gate: what follows would only repeat the same "no" in other words
        return _all(parts)
    if "any" in cond:
        parts = [evaluate(c, ctx, kb, row) for c in cond["any"]]
        out = _any(parts)
        if out.value is False and cond.get("because"):
            out.reasons = [fmt(cond["because"], ctx, row)]
        if out.value is None and cond.get("unknown") is not None:
            out.unknown = [fmt(cond["unknown"], ctx, row)]
        return out
    if "not" in cond:
        inner = evaluate(cond["not"], ctx, kb, row)
        if inner.value is None:
            return Outcome(None, unknown=[fmt(cond.get("unknown") or cond["because"], ctx, row)])
        if inner.value:
            return Outcome(False, reasons=[fmt(cond["because"], ctx, row)])
        return Outcome(True)
    if "test" in cond:
        fn = TESTS.get(cond["test"])
        if fn is None:
            raise KeyError(f"unknown test {cond['test']!r}")
        out = fn(cond, ctx, kb, row)
        if out.value is False and cond.get("because"):
            detail = "; ".join(out.reasons)
            out.reasons = [fmt(cond["because"], ctx, row, detail=detail, **out.vars)]
        return out
    if "fact" in cond:
        return _leaf(cond, ctx, row)
    raise KeyError(f"not a condition: {sorted(cond)}")


def _all(parts: Sequence[Outcome]) -> Outcome:
    out = Outcome(True)
    for p in parts:
        out.warnings.extend(p.warnings)
        out.unknown.extend(p.unknown)
        out.effects.update(p.effects)
        out.tags.extend(p.tags)
        if p.value is False:
            out.value = False
            out.reasons.extend(p.reasons)
        elif p.value is None and out.value is True:
            out.value = None
    return out


def _any(parts: Sequence[Outcome]) -> Outcome:
    for p in parts:
        if p.value is True:
            return Outcome(True, warnings=list(p.warnings), effects=dict(p.effects), tags=list(p.tags))
    unknown = [p for p in parts if p.value is None]
    if unknown:
        return Outcome(None, unknown=[w for p in unknown for w in p.unknown])
    return Outcome(False, reasons=[r for p in parts for r in p.reasons])


_OPS = ("equals", "in", "contains", "gte", "lte", "gt", "lt", "specifier", "truthy")
_NOT_OPS = ("fact", "because", "unknown", "stop")


def _leaf(cond: Dict[str, Any], ctx: Ctx, row: Optional[Dict[str, Any]]) -> Outcome:
    path = cond["fact"]
    value = lookup(ctx, path, row)
    op = next((o for o in _OPS if o in cond), None)
    if op is None:
        raise KeyError(f"condition on {path} has no operator")
    operand = resolve(cond[op], ctx, row)
    if value is None or (op == "specifier" and version(value) is None):
        text = cond.get("unknown")
        if text is None:
            text = f"could not check {path} (not in the scan)"
        return Outcome(None, unknown=[fmt(text, ctx, row, value=value, operand=operand)])
    ok: bool
    if op == "equals":
        ok = value == operand
    elif op == "in":
        ok = value in (operand or [])
    elif op == "contains":
        ok = operand in value
    elif op == "truthy":
        ok = bool(value) == bool(operand)
    elif op == "specifier":
        if operand is None:
            return Outcome(True)
        try:
            ok = _spec(str(operand)).contains(version(value), prereleases=True)  # type: ignore[arg-type]
        except InvalidSpecifier:
            raise ValueError(f"bad specifier {operand!r} for {path}") from None
    else:
        a, b = _num(value), _num(operand)
        if a is None or b is None:
            return Outcome(None, unknown=[f"could not compare {path}={value!r} with {operand!r}"])
        ok = {"gte": a >= b, "lte": a <= b, "gt": a > b, "lt": a < b}[op]
    if ok:
        return Outcome(True)
    text = cond.get("because") or f"{path} is {{value}}, needs {op} {{operand}}"
    return Outcome(False, reasons=[fmt(text, ctx, row, value=value, operand=operand)])


def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v))
    except ValueError:
        ver = version(v)
        if ver is None:
            return None
        rel = list(ver.release) + [0, 0, 0]
        return rel[0] * 1e6 + rel[1] * 1e3 + rel[2]


# --------------------------------------------------------------------------- named tests

TestFn = Callable[[Dict[str, Any], Ctx, Kb, Optional[Dict[str, Any]]], Outcome]
TESTS: Dict[str, TestFn] = {}


def test(name: str) -> Callable[[TestFn], TestFn]:
    def deco(fn: TestFn) -> TestFn:
        TESTS[name] = fn
        return fn

    return deco


def _toolkit_rows(kb: Kb) -> List[Dict[str, Any]]:
    rows = (kb.get("nvidia_gpus") or {}).get("cuda_toolkit_min_driver") or []
    return [r for r in rows if isinstance(r, dict) and r.get("cuda")]


def _driver_column(ctx: Ctx) -> str:
    # In WSL2 the driver is the Windows one (nvidia-smi there prints the Windows number).
    if lookup(ctx, "os.system") == "Windows" or lookup(ctx, "os.wsl"):
        return "windows"
    return "linux"


def _threshold(row: Dict[str, Any], column: str) -> Optional[str]:
    value = row.get(column)
    if value is None and column == "windows":
        value = row.get("linux")  # NVIDIA publishes no Windows number for 13.x [inference: same branch]
    return str(value) if value is not None else None


def ceiling_words(ctx: Ctx, kb: Kb) -> str:
    """'CUDA 12.8', or what can be said when the driver predates every row of the table."""
    c = cuda_ceiling(ctx, kb)
    if c:
        return f"CUDA {c}"
    rows = _toolkit_rows(kb)
    if rows and version(lookup(ctx, "nvidia.driver")) is not None:
        oldest = min(rows, key=lambda r: version(r["cuda"]))  # type: ignore[arg-type, return-value]
        return f"a CUDA older than {oldest['cuda']}"
    return "an unknown CUDA version"


def cuda_ceiling(ctx: Ctx, kb: Kb) -> Optional[str]:
    """The newest CUDA the driver supports natively: nvidia-smi says it, or the toolkit table."""
    stated = lookup(ctx, "nvidia.cuda_version")
    if stated:
        return str(stated)
    driver = version(lookup(ctx, "nvidia.driver"))
    if driver is None:
        return None
    column = _driver_column(ctx)
    best: Optional[str] = None
    for r in _toolkit_rows(kb):
        t = version(_threshold(r, column))
        if t is not None and driver >= t:
            if best is None or version(r["cuda"]) > version(best):  # type: ignore[operator]
                best = str(r["cuda"])
    return best


@test("cuda_driver_runs")
def _cuda_driver_runs(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    need = str(resolve(cond["cuda"], ctx, row))
    label = fmt(cond.get("label", "CUDA {row.cuda}"), ctx, row)
    driver = lookup(ctx, "nvidia.driver")
    ceiling = cuda_ceiling(ctx, kb)
    need_v = version(need)
    if ceiling is not None and version(ceiling) >= need_v:  # type: ignore[operator]
        return Outcome(True)
    column = _driver_column(ctx)
    major = need_v.major if need_v is not None else None
    compat = next(
        (r for r in (kb.get("cuda_drivers") or {}).get("minor_compat", []) if r.get("major") == major), None
    )
    minimum = _threshold(compat, column) if compat else None
    native = next((_threshold(r, column) for r in _toolkit_rows(kb) if str(r["cuda"]) == need), None)
    if driver is None:
        if ceiling is None:
            return Outcome(
                None,
                unknown=[
                    f"the NVIDIA driver version is unknown, so {label} (CUDA {need}) "
                    "could not be checked against it"
                ],
            )
        return Outcome(
            None,
            unknown=[
                f"the driver supports CUDA {ceiling} but its version is unknown, so "
                f"CUDA {need} minor-version compatibility could not be checked"
            ],
        )
    if minimum and version(driver) >= version(minimum):  # type: ignore[operator]
        note = (
            f"driver {driver} supports {ceiling_words(ctx, kb)}; the {label} wheels (CUDA {need}) run on it "
            f"through CUDA minor-version compatibility (CUDA {major}.x needs a driver >= {minimum})"
        )
        if native:
            note += f"; a driver >= {native} runs CUDA {need} natively"
        return Outcome(True, warnings=[note], tags=["compat"])
    why = (
        f"the NVIDIA driver {driver} supports {ceiling_words(ctx, kb)}; {label} (CUDA {need}) needs a driver"
    )
    why += f" >= {minimum}" if minimum else f" >= {native}" if native else " newer than this one"
    return Outcome(False, reasons=[why])


def arch_coverage(archs: Sequence[str], cc: str) -> Optional[str]:
    """'cubin' when a compiled binary runs on this compute capability, 'ptx' when only PTX JIT does."""
    have = cc_tuple(cc)
    via_ptx = False
    for a in archs:
        base, _, extra = str(a).partition("+")
        if base.endswith(("a", "f")):  # sm_90a-style targets run only on that exact chip
            continue
        arch = cc_tuple(base)
        if arch[0] == have[0] and arch[1] <= have[1]:
            return "cubin"
        if extra.upper() == "PTX" and arch <= have:
            via_ptx = True
    return "ptx" if via_ptx else None


@test("cuda_archs_cover")
def _cuda_archs_cover(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    archs = resolve(cond["archs"], ctx, row) or []
    if lookup(ctx, "cpu.arch") == "arm64" and "archs_aarch64" in cond:
        arm = resolve(cond["archs_aarch64"], ctx, row)
        if arm is not None:
            archs = arm
    label = fmt(cond.get("label", "these wheels"), ctx, row)
    if not archs:
        return Outcome(False, reasons=[f"{label} have no build for {lookup(ctx, 'cpu.arch') or 'this CPU'}"])
    need = str(resolve(cond.get("cuda", "0"), ctx, row))
    ceiling = cuda_ceiling(ctx, kb)
    out = Outcome(True)
    shown = ", ".join(
        f"sm_{a.replace('.', '').replace('+PTX', '')}" + ("+PTX" if "+PTX" in a else "") for a in archs
    )
    for gpu in lookup(ctx, "nvidia.gpus") or []:
        cc = gpu.get("cc")
        name = gpu.get("name") or "the NVIDIA GPU"
        if not cc:
            out.value = None if out.value is not False else False
            out.unknown.append(
                f"the compute capability of {name} is unknown, so it could not be checked "
                f"against {label} ({shown})"
            )
            continue
        how = arch_coverage(archs, cc)
        sm = "sm_" + cc.replace(".", "")
        if how == "cubin":
            continue
        if how == "ptx":
            if ceiling is not None and version(ceiling) < version(need):  # type: ignore[operator]
                out.value = False
                out.reasons.append(
                    f"{label} carry only PTX that fits {name} ({sm}), and JIT-compiling it needs "
                    f"a driver for CUDA {need} (this one supports CUDA {ceiling})"
                )
            else:
                out.warnings.append(
                    f"{name} ({sm}) runs {label} through PTX JIT: the first run compiles "
                    "kernels and takes longer"
                )
            continue
        out.value = False
        out.reasons.append(f"{label} are built for {shown}; {name} is {sm}")
    return out


@test("cuda_min_cc")
def _cuda_min_cc(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    minimum = str(resolve(cond["min"], ctx, row))
    label = fmt(cond.get("label", "this build"), ctx, row)
    out = Outcome(True)
    for gpu in lookup(ctx, "nvidia.gpus") or []:
        cc = gpu.get("cc")
        if not cc:
            out.value = None if out.value is not False else False
            out.unknown.append(f"the compute capability of {gpu.get('name')} is unknown")
        elif cc_tuple(cc) < cc_tuple(minimum):
            out.value = False
            out.reasons.append(f"{label} needs compute capability >= {minimum}; {gpu.get('name')} is {cc}")
    return out


def _override_rows(kb: Kb) -> Dict[str, Dict[str, Any]]:
    return {r["gfx"]: r for r in (kb.get("rocm") or {}).get("overrides", [])}


@test("rocm_gfx_supported")
def _rocm_gfx_supported(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    built = set(resolve(cond["gfx"], ctx, row) or [])
    label = fmt(cond.get("label", "these wheels"), ctx, row)
    targets = lookup(ctx, "amd.targets") or []
    overrides = _override_rows(kb)
    breaks = {r["gfx"]: r for r in (kb.get("rocm") or {}).get("override_breaks", [])}
    dropped = {r["gfx"]: r for r in (kb.get("rocm") or {}).get("not_in_rocm_matrix", [])}
    out = Outcome(True)
    env_values = set()
    for gpu in targets:
        gfx, name = gpu.get("gfx"), gpu.get("name") or "the AMD GPU"
        if not gfx:
            # No evidence, no ROCm: an install that cannot work costs more than a missed one.
            out.value = False
            out.reasons.append(
                f"the gfx target of {name} is unknown (no rocminfo in the capture, and its PCI id "
                "is not in mlprobe's table), so ROCm support cannot be confirmed"
            )
            continue
        if gfx in built:
            if gfx in dropped:
                out.warnings.append(f"{name} ({gfx}): {dropped[gfx]['note']}")
            continue
        ov = overrides.get(gfx)
        if ov and ov["runs_as"] in built:
            env_values.add(ov["override"])
            text = (
                f"{label} are not built for {gfx} ({name}); "
                f"HSA_OVERRIDE_GFX_VERSION={ov['override']} runs it "
                f"as {ov['runs_as']} (unofficial)"
            )
            if gpu.get("runtime_gfx") == ov["runs_as"]:
                text += "; the scan shows the override already in effect"
            if ov.get("caveat"):
                text += f"; {ov['caveat']}"
            out.warnings.append(text)
            out.effects["unofficial"] = True
            continue
        out.value = False
        if gfx in breaks:
            b = breaks[gfx]
            out.reasons.append(
                f"{label} are not built for {gfx} ({name}), and no override maps it to a built "
                f"target (HSA_OVERRIDE_GFX_VERSION={b['override']}: {b['why']})"
            )
        else:
            out.reasons.append(
                f"{label} are not built for {gfx} ({name}), and no known override maps it to "
                f"one they are built for ({', '.join(sorted(built))})"
            )
    if env_values:
        if len(env_values) == 1:
            out.effects.setdefault("env", {})["HSA_OVERRIDE_GFX_VERSION"] = env_values.pop()
        else:
            out.value = False
            out.reasons.append(
                "the AMD GPUs need different HSA_OVERRIDE_GFX_VERSION values; run one at a time"
            )
    if not targets:
        return Outcome(False, reasons=["no AMD GPU was found"])
    if any(g.get("integrated") for g in targets):
        out.effects["integrated"] = True
    others = lookup(ctx, "amd.others") or []
    if others and out.value is not False:
        out.warnings.append(
            "also visible to ROCm: "
            + ", ".join(f"{g.get('name')} ({g.get('gfx')})" for g in others)
            + "; the plan and verify target "
            + ", ".join(str(g.get("name")) for g in targets)
        )
    return out


@test("rocm_wsl_ok")
def _rocm_wsl_ok(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    if not lookup(ctx, "os.wsl"):
        return Outcome(True)
    families = (kb.get("rocm") or {}).get("wsl_gfx_families", [])
    out = Outcome(
        True,
        warnings=[
            "ROCm inside WSL2 goes through AMD's WSL support in the Windows Adrenalin "
            "driver (official from 24.12.1) with AMD's WSL runtime"
        ],
    )
    for gpu in lookup(ctx, "amd.targets") or []:
        gfx = gpu.get("gfx") or ""
        if not any(gfx.startswith(f["prefix"]) for f in families):
            out.value = False
            names = ", ".join(f"{f['prefix']}x ({f['family']})" for f in families)
            out.reasons.append(
                f"ROCm in WSL2 exposes only {names} GPUs; {gpu.get('name')} is {gfx or 'unknown'} "
                "(AMD: RDNA2 and older are not supported under WSL, and hang)"
            )
    return out


@test("windows_build_ok")
def _windows_build_ok(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    native, wsl = int(cond["native_min"]), int(cond["wsl_min"])
    what = cond.get("what", "this package")
    build = lookup(ctx, "os.windows_build")
    if lookup(ctx, "os.wsl"):
        if build is None:
            return Outcome(
                None,
                unknown=[
                    f"{what} in WSL2 needs Windows build >= {wsl}; the Windows build is not "
                    "visible from inside WSL"
                ],
            )
        return Outcome(
            build >= wsl, reasons=[f"{what} in WSL2 needs Windows build >= {wsl}; this is {build}"]
        )
    system = lookup(ctx, "os.system")
    if system == "Windows":
        if build is None:
            return Outcome(None, unknown=[f"{what} needs Windows 10 build >= {native}; the build is unknown"])
        return Outcome(build >= native, reasons=[f"{what} needs Windows build >= {native}; this is {build}"])
    if system is None:
        return Outcome(None, unknown=[f"the OS is unknown; {what} needs Windows (build >= {native}) or WSL2"])
    return Outcome(False, reasons=[f"{what} runs on Windows or in WSL2, not on {system}"])


@test("gpu_vendor_present")
def _gpu_vendor_present(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    vendors = resolve(cond["vendors"], ctx, row) or []
    pool = lookup(ctx, cond.get("pool", "metal.gpus")) or []
    hits = [g for g in pool if g.get("vendor") in vendors]
    if hits:
        return Outcome(True, effects={"device_name": hits[0].get("name")})
    seen = ", ".join(f"{g.get('name')} ({g.get('vendor')})" for g in pool) or "none"
    words = {"vendors": " or ".join(vendors), "seen": seen}
    return Outcome(False, reasons=[f"needs a {words['vendors']} GPU; Metal GPUs seen: {seen}"], vars=words)


def _xpu_supported(gpu: Dict[str, Any], kb: Kb) -> Optional[bool]:
    pci = (gpu.get("pci_device_id") or "").lower()
    if pci:
        for r in (kb.get("intel_gpus") or {}).get("rows", []):
            if str(r.get("pci_device_id", "")).lower() == pci:
                return bool(r.get("xpu_supported"))
    name = gpu.get("name") or ""
    if not name:
        return None
    for r in (kb.get("intel_xpu") or {}).get("supported_names", []):
        if re.search(r["pattern"], name, re.I):
            return True
    return False


@test("directml_gpu")
def _directml_gpu(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    gpus = lookup(ctx, "directml.gpus") or []
    if not gpus:
        return Outcome(
            False,
            reasons=[
                "no GPU that DirectML can use was found (DirectML needs a DirectX 12 GPU on "
                "Windows 10 1709+, or WSL2)"
            ],
        )
    best = sorted(gpus, key=lambda g: (bool(g.get("integrated")), g.get("vendor") == "intel"))[0]
    return Outcome(
        True, effects={"device_name": best.get("name"), "integrated": bool(best.get("integrated"))}
    )


@test("xpu_gpu_supported")
def _xpu_gpu_supported(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    gpus = lookup(ctx, "intel.gpus") or []
    if not gpus:
        return Outcome(False, reasons=["no Intel GPU was found"])
    verdicts = [(g, _xpu_supported(g, kb)) for g in gpus]
    good = [g for g, ok in verdicts if ok]
    if good:
        g = sorted(good, key=lambda x: bool(x.get("integrated")))[0]
        return Outcome(True, effects={"integrated": bool(g.get("integrated")), "device_name": g.get("name")})
    if all(ok is None for _, ok in verdicts):
        return Outcome(
            None, unknown=["the Intel GPU's model is unknown, so XPU support could not be checked"]
        )
    names = ", ".join(str(g.get("name")) for g in gpus)
    return Outcome(
        False,
        reasons=[
            f"PyTorch's XPU backend supports Intel Arc A-/B-Series, Core Ultra 'Arc Graphics' "
            f"and Data Center GPU Max; this machine has {names}"
        ],
    )


_PML_VENDORS = (("NVIDIA", "nvidia"), ("Intel", "intel"), ("Advanced Micro Devices", "amd"), ("AMD", "amd"))


def plaidml_opencl_id(vendor: Optional[str], name: str, kb: Kb) -> str:
    rule: Dict[str, Any] = next(
        (r for r in (kb.get("plaidml") or {}).get("device_ids", []) if r.get("hal") == "opencl"), {}
    )
    short = vendor or ""
    for key, value in (rule.get("vendor_map") or dict(_PML_VENDORS)).items():
        if key.lower() in (vendor or "").lower():
            short = value
            break
    for prefix in rule.get("strip_prefixes", ["Intel(R) ", "AMD "]):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return ("opencl " + short + " " + name).strip().lower().replace(" ", "_")


@test("plaidml_device")
def _plaidml_device(cond: Dict[str, Any], ctx: Ctx, kb: Kb, row: Optional[Dict[str, Any]]) -> Outcome:
    """Pick the device plaidml-setup would offer first, without asking: a discrete GPU, then an integrated
    one, then llvm_cpu.0 (which needs PLAIDML_EXPERIMENTAL=1)."""
    cands: List[Tuple[int, str, bool, str, bool]] = []  # (speed, id, experimental, name, integrated)
    system = lookup(ctx, "os.system")
    defaults = {r["hal"]: r["vendors"] for r in (kb.get("plaidml") or {}).get("default_config_vendors", [])}
    seen: Dict[str, int] = {}

    def uniq(base: str) -> str:
        n = seen.get(base, 0)
        seen[base] = n + 1
        return f"{base}.{n}"

    if system == "Darwin":
        for g in lookup(ctx, "metal.gpus") or []:
            if g.get("inferred"):
                continue
            did = uniq("metal " + str(g.get("name")).lower().replace(" ", "_")).replace(" ", "_")
            integ = bool(g.get("integrated"))
            cands.append(
                (
                    20 if integ else 40,
                    did,
                    g.get("vendor") not in defaults.get("metal", []),
                    str(g.get("name")),
                    integ,
                )
            )
    for d in lookup(ctx, "opencl.gpu_devices") or []:
        did = uniq(plaidml_opencl_id(d.get("vendor"), str(d.get("name")), kb))
        integ = bool(d.get("integrated"))
        vendor_short = did.split("_")[1] if "_" in did else ""
        cands.append(
            (
                20 if integ else 40,
                did,
                vendor_short not in defaults.get("opencl", []),
                str(d.get("name")),
                integ,
            )
        )
    cands.append((5, "llvm_cpu.0", True, "the CPU through LLVM", False))
    cands.sort(key=lambda c: -c[0])
    speed, did, experimental, name, integ = cands[0]
    out = Outcome(
        True,
        effects={
            "device_id": did,
            "device_name": name,
            "experimental": experimental,
            "speed": speed,
            "integrated": integ,
            "env": {
                "PLAIDML_DEVICE_IDS": did,
                "PLAIDML_EXPERIMENTAL": "1" if experimental else "0",
                "KERAS_BACKEND": "plaidml.keras.backend",
            },
        },
    )
    if did == "llvm_cpu.0":
        if lookup(ctx, "opencl.known") is False and lookup(ctx, "gpus"):
            out.warnings.append(
                "the capture lists no OpenCL devices, so PlaidML falls back to llvm_cpu.0; "
                "install the GPU's OpenCL driver (and clinfo) to use the GPU"
            )
        out.warnings.append(
            "PlaidML runs on the CPU here (llvm_cpu.0, experimental): expect it to be slower than "
            "TensorFlow or PyTorch on the same CPU"
        )
    elif experimental:
        out.warnings.append(f"{did} is one of PlaidML's experimental devices (PLAIDML_EXPERIMENTAL=1)")
    return out


# --------------------------------------------------------------------------- derived facts


def _norm_arch(arch: Optional[str]) -> Optional[str]:
    if not arch:
        return None
    a = arch.lower()
    if a in ("x86_64", "amd64", "x64", "i686-64"):
        return "x86_64"
    if a in ("aarch64", "arm64", "armv8", "arm64e"):
        return "arm64"
    return a


def _major_minor(v: Optional[str]) -> Optional[str]:
    if not v:
        return None
    m = re.match(r"^\s*(\d+)\.(\d+)", str(v))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _cc_from_name(name: Optional[str], kb: Kb) -> Optional[str]:
    if not name:
        return None
    for r in (kb.get("nvidia_gpus") or {}).get("compute_capability_by_name", []):
        try:
            if re.search(r["pattern"], name.upper()):
                return str(r["compute_capability"])
        except re.error:
            continue
    return None


def _s(v: Any, pattern: Optional[str] = None) -> Optional[str]:
    if not isinstance(v, str) or not v.strip():
        return None
    return v if pattern is None or re.fullmatch(pattern, v.strip()) else None


def _i(v: Any) -> Optional[int]:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def _b(v: Any) -> Optional[bool]:
    return v if isinstance(v, bool) else None


def _strs(v: Any) -> List[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, (list, tuple)) else []


def _dicts(v: Any) -> List[Dict[str, Any]]:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, (list, tuple)) else []


def sanitise_report(report: Any) -> Dict[str, Any]:
    """Only the fields the rules read, each of the type the schema gives it (anything else is unknown)."""

    def part(d: Any, key: str) -> Dict[str, Any]:
        v = d.get(key) if isinstance(d, dict) else None
        return v if isinstance(v, dict) else {}

    rep: Dict[str, Any] = report if isinstance(report, dict) else {}
    os_, cpu, py, rt = part(rep, "os"), part(rep, "cpu"), part(rep, "python"), part(rep, "runtimes")
    cuda: Optional[Dict[str, Any]] = part(rt, "cuda") if isinstance(rt.get("cuda"), dict) else None
    ocl: Optional[Dict[str, Any]] = part(rt, "opencl") if isinstance(rt.get("opencl"), dict) else None
    gpus = []
    for g in _dicts(rep.get("gpus")):
        gpus.append(
            {
                "vendor": (_s(g.get("vendor")) or "unknown").lower(),
                "name": _s(g.get("name")),
                "driver_version": _s(g.get("driver_version")),
                "compute_capability": _s(g.get("compute_capability"), r"\d+\.\d+"),
                "gfx_target": _s(g.get("gfx_target"), r"gfx[0-9a-f]+"),
                "runtime_gfx_target": _s(g.get("runtime_gfx_target"), r"gfx[0-9a-f]+"),
                "integrated": _b(g.get("integrated")),
                "apis": _strs(g.get("apis")),
                "mig_mode": _s(g.get("mig_mode")),
                "pci_device_id": _s(g.get("pci_device_id")),
            }
        )
    platforms = []
    for p in _dicts((ocl or {}).get("platforms")):
        platforms.append(
            {
                "name": _s(p.get("name")),
                "devices": [
                    {
                        "name": _s(d.get("name")),
                        "vendor": _s(d.get("vendor")),
                        "type": _s(d.get("type")),
                        "host_unified_memory": _b(d.get("host_unified_memory")),
                    }
                    for d in _dicts(p.get("devices"))
                ],
            }
        )
    return {
        "os": {
            k: _s(os_.get(k))
            for k in ("system", "release", "macos_version", "distro_id", "distro_version", "glibc")
        }
        | {"wsl": _b(os_.get("wsl")), "windows_build": _i(os_.get("windows_build"))},
        "cpu": {
            "arch": _s(cpu.get("arch")),
            "flags": _strs(cpu.get("flags")),
            "x86_64_level": _i(cpu.get("x86_64_level")),
            "vendor": _s(cpu.get("vendor")),
            "model": _s(cpu.get("model")),
        },
        "python": {"version": _s(py.get("version")), "machine": _s(py.get("machine"))},
        "gpus": gpus,
        "runtimes": {
            "cuda": {"version": _s(cuda.get("version")), "driver_version": _s(cuda.get("driver_version"))}
            if cuda
            else None,
            "opencl": {"platforms": platforms} if ocl is not None else None,
        },
        "frameworks": [
            {k: _s(f.get(k)) for k in ("name", "version", "flavour", "cuda", "hip")}
            for f in _dicts(rep.get("frameworks"))
        ],
        "usb_accelerators": [
            {k: _s(u.get(k)) for k in ("vendor_id", "product_id", "name", "kind")}
            for u in _dicts(rep.get("usb_accelerators"))
        ],
    }


def derive_facts(report: Dict[str, Any], kb: Kb, python: Optional[str] = None) -> Ctx:
    """The flat, evidence-based view the conditions read. `python` (X.Y) overrides the target."""
    report = sanitise_report(report)
    os_ = dict(report.get("os") or {})
    cpu = dict(report.get("cpu") or {})
    py = dict(report.get("python") or {})
    gpus = [dict(g) for g in report.get("gpus") or [] if isinstance(g, dict)]
    inferred: List[str] = []
    rules = (kb.get("host_inference") or {}).get("rules", [])

    arch = _norm_arch(cpu.get("arch")) or _norm_arch(py.get("machine"))
    system = os_.get("system")
    vendors = {g.get("vendor") for g in gpus}

    def infer(kind: str, **match: Any) -> Optional[Dict[str, Any]]:
        for r in rules:
            if r.get("when") == kind and all(r.get(k) == v for k, v in match.items()):
                return dict(r.get("implies") or {})
        return None

    if system is None:
        if "apple" in vendors:
            system = (infer("gpu_vendor", vendor="apple") or {}).get("os.system")
            inferred.append("the OS is taken to be macOS (an Apple GPU is listed)")
        elif any(
            r.get("when") == "nvidia_name"
            and any(
                re.search(r["pattern"], str(g.get("name") or "").upper())
                for g in gpus
                if g.get("vendor") == "nvidia"
            )
            for r in rules
        ):
            system = "Linux"
            inferred.append("the OS is taken to be Linux (a Grace superchip GPU is listed)")
        elif os_.get("windows_build") is not None or any("directml" in (g.get("apis") or []) for g in gpus):
            system = "Windows"
    if arch is None:
        for g in gpus:
            for r in rules:
                if (
                    r.get("when") == "nvidia_name"
                    and g.get("vendor") == "nvidia"
                    and re.search(r["pattern"], str(g.get("name") or "").upper())
                ):
                    arch = r["implies"].get("cpu.arch")
                    inferred.append(
                        f"the CPU is taken to be arm64 ({g.get('name')} sits on a Grace superchip)"
                    )
                    break
            if arch:
                break
    if arch is None and vendors & {"apple", "arm", "qualcomm"}:
        v = sorted(str(x) for x in vendors & {"apple", "arm", "qualcomm"})[0]
        arch = (infer("gpu_vendor", vendor=v) or {}).get("cpu.arch")
        if arch:
            inferred.append(f"the CPU is taken to be arm64 (an {v.capitalize()} GPU is listed)")
    if arch is None and system == "Darwin" and gpus and "apple" not in vendors:
        arch = (infer("darwin_non_apple_gpu") or {}).get("cpu.arch", "x86_64")
        inferred.append("the CPU is taken to be x86_64 (an Intel Mac: its GPUs are Intel/AMD)")

    flags = cpu.get("flags") or None
    ctx: Ctx = {
        "os": {
            "system": system,
            "release": os_.get("release"),
            "wsl": os_.get("wsl"),
            "windows_build": os_.get("windows_build"),
            "macos_version": os_.get("macos_version"),
            "distro_id": os_.get("distro_id"),
            "distro_version": os_.get("distro_version"),
            "glibc": os_.get("glibc"),
        },
        "cpu": {
            "arch": arch,
            "flags": list(flags) if flags else None,
            "x86_64_level": cpu.get("x86_64_level"),
            "vendor": cpu.get("vendor"),
            "model": cpu.get("model"),
        },
        "gpus": gpus,
        "inferred": inferred,
    }
    if ctx["cpu"]["flags"] is None and arch == "x86_64" and cpu.get("x86_64_level"):
        level = int(cpu["x86_64_level"])  # v3 implies AVX; v1/v2 say nothing about it
        if level >= 3:
            ctx["cpu"]["flags"] = ["avx", "avx2"]

    # Target Python: --python wins, then the scanned interpreter.
    target = _major_minor(python) or _major_minor(py.get("version"))
    ctx["python"] = {
        "version": target,
        "source": "--python" if python else ("scan" if target else None),
        "scanned": py.get("version"),
    }

    # NVIDIA
    rt = report.get("runtimes") or {}
    cuda_rt = rt.get("cuda") if isinstance(rt.get("cuda"), dict) else {}
    nv = [g for g in gpus if g.get("vendor") == "nvidia"]
    nv_list = []
    for g in nv:
        cc = g.get("compute_capability") or _cc_from_name(g.get("name"), kb)
        nv_list.append(
            {
                "name": g.get("name"),
                "cc": cc,
                "driver": g.get("driver_version"),
                "mig": str(g.get("mig_mode") or "").lower() == "enabled",
                "integrated": g.get("integrated"),
            }
        )
    driver = (cuda_rt or {}).get("driver_version") or next(
        (g["driver"] for g in nv_list if g["driver"]), None
    )
    ctx["nvidia"] = {
        "count": len(nv),
        "gpus": nv_list,
        "driver": driver,
        "cuda_version": _major_minor((cuda_rt or {}).get("version")),
        "mig": any(g["mig"] for g in nv_list),
        "names": [g["name"] for g in nv_list],
    }

    # AMD: target discrete GPUs when there are any; the integrated ones are "others".
    amd = [
        {
            "name": g.get("name"),
            "gfx": g.get("gfx_target") or g.get("runtime_gfx_target"),
            "runtime_gfx": g.get("runtime_gfx_target"),
            "integrated": bool(g.get("integrated")),
        }
        for g in gpus
        if g.get("vendor") == "amd"
    ]
    discrete = [g for g in amd if not g["integrated"]]
    targets = discrete or amd
    ctx["amd"] = {
        "count": len(amd),
        "gpus": amd,
        "targets": targets,
        "others": [g for g in amd if g not in targets],
        "gfx": [g["gfx"] for g in targets if g["gfx"]],
    }

    intel = [g for g in gpus if g.get("vendor") == "intel"]
    ctx["intel"] = {"count": len(intel), "gpus": intel}

    metal = [g for g in gpus if "metal" in (g.get("apis") or []) or g.get("vendor") == "apple"]
    if (
        system == "Darwin"
        and arch == "arm64"
        and not any(g.get("vendor") == "apple" for g in metal)
        and (cpu.get("vendor") == "apple" or str(cpu.get("model") or "").startswith("Apple"))
    ):
        name = f"{cpu.get('model') or 'Apple silicon'} GPU"
        metal.append({"vendor": "apple", "name": name, "integrated": True, "inferred": True})
        inferred.append(
            f"an integrated Apple GPU is assumed ({cpu.get('model')} is an Apple silicon chip; the capture "
            "lists no GPU)"
        )
    ctx["apple"] = {"count": sum(1 for g in metal if g.get("vendor") == "apple")}
    ctx["metal"] = {"count": len(metal), "gpus": metal}

    dml = [g for g in gpus if "directml" in (g.get("apis") or [])]
    if not dml and (os_.get("wsl") or system == "Windows"):
        dml = [g for g in gpus if g.get("vendor") in ("nvidia", "amd", "intel", "qualcomm")]
    ctx["directml"] = {"count": len(dml), "gpus": dml, "discrete": any(not g.get("integrated") for g in dml)}

    ocl = rt.get("opencl") if isinstance(rt.get("opencl"), dict) else None
    devs = []
    for p in (ocl or {}).get("platforms", []) or []:
        for d in p.get("devices", []) or []:
            devs.append(
                {
                    "name": d.get("name"),
                    "vendor": d.get("vendor"),
                    "type": d.get("type"),
                    "platform": p.get("name"),
                    "integrated": bool(d.get("host_unified_memory"))
                    if d.get("host_unified_memory") is not None
                    else None,
                }
            )
    gpu_devs = [d for d in devs if str(d.get("type") or "").upper().find("GPU") >= 0]
    for d in gpu_devs:  # integrated: the OpenCL flag, else the matching GPU entry
        if d["integrated"] is None:
            match = next(
                (
                    g
                    for g in gpus
                    if g.get("name")
                    and d.get("name")
                    and (
                        str(g["name"]).lower() in str(d["name"]).lower()
                        or str(d["name"]).lower() in str(g["name"]).lower()
                    )
                ),
                None,
            )
            d["integrated"] = bool(match and match.get("integrated"))
    ctx["opencl"] = {
        "known": ocl is not None,
        "devices": devs,
        "gpu_devices": gpu_devs,
        "gpu_count": len(gpu_devs),
    }

    fws: Dict[str, Any] = {}
    for fw in report.get("frameworks") or []:
        if isinstance(fw, dict) and fw.get("name"):
            fws[str(fw["name"])] = fw
    ctx["frameworks"] = fws
    usb = [u for u in report.get("usb_accelerators") or [] if isinstance(u, dict)]
    kinds = sorted({str(u.get("kind") or "") for u in usb} - {""})
    if any(str(u.get("vendor_id", "")).lower().endswith("03e7") for u in usb) and "movidius-ncs" not in kinds:
        kinds.append("movidius-ncs")
    ctx["usb"] = {"count": len(usb), "kinds": kinds, "devices": usb}
    return ctx


# --------------------------------------------------------------------------- recipes


def _row_label(spec: Dict[str, Any], ctx: Ctx, row: Dict[str, Any]) -> str:
    return fmt(spec.get("label", "{row.index}"), ctx, row)


def table_rows(kb: Kb, ref: str) -> List[Dict[str, Any]]:
    stem, _, key = ref.partition(".")
    rows = (kb.get(stem) or {}).get(key) or []
    return [r for r in rows if isinstance(r, dict)]


def evaluate_recipe(recipe: Dict[str, Any], ctx: Ctx, kb: Kb) -> Verdict:
    rid = recipe["id"]
    base = evaluate(recipe.get("conditions") or {"all": []}, ctx, kb)
    reasons, warnings = list(base.reasons), list(base.warnings)
    unknown_notes = list(base.unknown)
    effects = dict(base.effects)
    row: Optional[Dict[str, Any]] = None
    variants: List[Dict[str, Any]] = []
    newer_rejected = False
    value = base.value
    spec = recipe.get("variants")
    if spec:
        rows = table_rows(kb, spec["table"])
        tried = [(r, evaluate(spec.get("conditions") or {"all": []}, ctx, kb, r)) for r in rows]
        variants = [
            {"label": _row_label(spec, ctx, r), "fits": o.value, "reasons": o.reasons, "unknown": o.unknown}
            for r, o in tried
        ]
        pick = _pick_row(tried, spec.get("group_by"))
        if base.value is False:
            pass  # the recipe is out already; the rows' reasons stay in `variants` for --why-not
        elif pick is None:
            value = False
            reasons.extend(_summarise([o for _, o in tried]))
        else:
            i, (row, o) = pick
            warnings.extend(o.warnings)
            unknown_notes.extend(o.unknown)
            effects.update(o.effects)
            if o.value is None and value is True:
                value = None
            newer_rejected = any(
                rv.value is False
                and str(r2.get(spec.get("version_key", "torch"), ""))
                != str(row.get(spec.get("version_key", "torch"), ""))
                for r2, rv in tried[:i]
            )
    for w in recipe.get("warn_if", []):
        o = evaluate(w["when"], ctx, kb, row)
        if o.value:
            warnings.append(fmt(w["text"], ctx, row))
    fits = value is not False
    return Verdict(
        rid,
        fits,
        _dedupe(reasons) if not fits else [],
        _dedupe(warnings),
        row,
        effects,
        _dedupe(unknown_notes),
        newer_rejected,
        variants,
    )


def _pick_row(
    tried: List[Tuple[Dict[str, Any], Outcome]], group_by: Optional[str]
) -> Optional[Tuple[int, Tuple[Dict[str, Any], Outcome]]]:
    """Table order is preference order. Within one group (one torch release) a row the hardware runs
    natively beats one it runs only through compatibility ("compat"); a fully known fit beats one with
    unknown facts, but only within the same group, so an unknown Python never sends the plan back to an
    old release."""

    def rank(o: Outcome) -> int:
        if o.value is False:
            return 9
        return (0 if o.value else 2) + (1 if "compat" in o.tags else 0)

    groups: List[List[int]] = []
    prev: Any = object()
    for i, (r, _) in enumerate(tried):
        key = r.get(group_by) if group_by else i
        if groups and key == prev:
            groups[-1].append(i)
        else:
            groups.append([i])
        prev = key
    for g in groups:
        best = min(g, key=lambda i: (rank(tried[i][1]), i))
        if rank(tried[best][1]) < 9:
            return best, tried[best]
    return None


def _summarise(outcomes: Sequence[Outcome], limit: int = 4) -> List[str]:
    """Why no row fits, nearest miss first: the rows with the fewest reasons say what would fix it."""
    order = sorted(range(len(outcomes)), key=lambda i: (len(outcomes[i].reasons), i))
    out = _dedupe([r for i in order for r in outcomes[i].reasons])
    if len(out) > limit:
        out = out[:limit] + [f"(and {len(out) - limit} more; see --why-not)"]
    return out


def _dedupe(items: Sequence[str]) -> List[str]:
    return list(dict.fromkeys(i for i in items if i))
