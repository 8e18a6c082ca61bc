"""Findings on what is installed: whether the framework builds the scan found can use this machine's
hardware (a CPU-only torch beside a GPU, a CUDA build the driver cannot run, a ROCm build without its
gfx target, TensorFlow on a CPU without AVX), each with the commands that fix it. Pure: no I/O."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence

from ..model import shell
from ..model.context import RulesContext
from ..model.facts import FrameworkFacts
from ..model.knowledge import Knowledge, Row
from ..model.plan import InstalledFinding, Recommendation
from ..model.vocabulary import vocabulary
from ..recipes import find_recipe
from .rules import Verdict, evaluate

def _top_of(recommended: Sequence[Recommendation], framework: str) -> Optional[Recommendation]:
    return next((e for e in recommended if e.framework == framework), None)


def _finding(
    name: str,
    fw: FrameworkFacts,
    status: str,
    message: str,
    fix: Optional[List[str]] = None,
    reasons: Optional[List[str]] = None,
) -> InstalledFinding:
    return InstalledFinding(package=name, version=fw.version or None, build=fw.flavour or None, status=status,
                            message=message, reasons=tuple(reasons or ()), fix=tuple(fix or ()))


def _fix(best: Optional[Recommendation], uninstall: str) -> List[str]:
    if not best:
        return []
    return [shell.posix(["python", "-m", "pip", "uninstall", "-y", uninstall])] + list(best.commands)


def _torch_row(kb: Knowledge, table: str, torch_version: str, index: str) -> Optional[Row]:
    mm = ".".join(torch_version.split("+")[0].split(".")[:2])
    rows = kb.at(table)
    hit = next((r for r in rows if r.get("torch") == mm and r.get("index") == index), None)
    if hit is None and table.endswith("rocm"):
        series = re.match(r"rocm(\d+\.\d+)", index)
        hit = next((r for r in rows if series and str(r.get("rocm")) == series.group(1)), None)
    return hit


def installed_findings(
    ctx: RulesContext,
    kb: Knowledge,
    verdicts: Dict[str, Verdict],
    recommended: Sequence[Recommendation],
) -> List[InstalledFinding]:
    fws = ctx.frameworks
    out: List[InstalledFinding] = []
    best_torch = _top_of(recommended, "torch")
    best_tf = _top_of(recommended, "tensorflow")
    torch = fws.get("torch")
    if torch:
        out.append(_torch_finding(torch, ctx, kb, best_torch))
    for name in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-macos"):
        if name in fws:
            out.append(_tf_finding(name, fws[name], ctx, best_tf, best_torch))
            break
    for name, rid in (
        ("torch-directml", "torch-directml"),
        ("tensorflow-directml-plugin", "tensorflow-directml-plugin"),
        ("tensorflow-metal", "tensorflow-metal"),
        ("plaidml-keras", "plaidml-keras"),
    ):
        if name not in fws:
            continue
        v = verdicts.get(rid)
        recipe = find_recipe(rid)
        if v is not None and not v.fits:
            out.append(
                _finding(
                    name,
                    fws[name],
                    "problem",
                    f"{name} is installed but does not fit this machine",
                    reasons=v.reasons,
                )
            )
        else:
            extra = list(recipe.warnings[:1])
            out.append(
                _finding(
                    name,
                    fws[name],
                    "ok" if recipe.status == "maintained" else "info",
                    f"{name} fits this machine"
                    + (f" ({recipe.status})" if recipe.status != "maintained" else ""),
                    reasons=extra,
                )
            )
    return out


def _gpu_words(ctx: RulesContext, backend: str) -> str:
    if backend == "cuda":
        return ", ".join(str(n) for n in ctx.nvidia.names) or "an NVIDIA GPU"
    if backend == "rocm":
        return ", ".join(f"{g.name} ({g.gfx})" for g in ctx.amd.targets) or "an AMD GPU"
    if backend == "xpu":
        return ", ".join(str(g.name if g.name and g.name.strip() else None) for g in ctx.intel.gpus) or "an Intel GPU"
    return "a GPU"


def _torch_finding(
    fw: FrameworkFacts, ctx: RulesContext, kb: Knowledge, best: Optional[Recommendation]
) -> InstalledFinding:
    ver = str(fw.version or "?")
    flavour = str(fw.flavour or "")
    darwin = ctx.os.system == "Darwin"
    gpu_best = best if best and best.backend in vocabulary().gpu_backends() else None
    if not flavour:
        return _finding(
            "torch",
            fw,
            "info",
            f"torch {ver} is installed; its build (CPU, CUDA, ROCm) is not in the capture, verify will tell",
        )
    if flavour == "cpu" and darwin:
        if best and best.backend == "mps":
            return _finding(
                "torch", fw, "ok", f"torch {ver} (the macOS build, with MPS) fits: {best.recipe}"
            )
        return _finding("torch", fw, "ok", f"torch {ver} (the macOS build) fits this Mac's CPU")
    if flavour == "cpu":
        if gpu_best and gpu_best.backend in ("cuda", "rocm", "xpu"):
            return _finding(
                "torch",
                fw,
                "problem",
                f"torch {ver} is a CPU-only build, but this machine has "
                f"{_gpu_words(ctx, gpu_best.backend)}"
                f" that {gpu_best.recipe} can use",
                fix=_fix(gpu_best, "torch"),
            )
        return _finding(
            "torch", fw, "ok", f"torch {ver} (CPU build) fits: no GPU here that a torch build can use"
        )
    if flavour.startswith("cu"):
        return _torch_cuda_finding(fw, ver, flavour, ctx, kb, best)
    if flavour.startswith("rocm"):
        return _torch_rocm_finding(fw, ver, flavour, ctx, kb, best)
    if flavour == "xpu":
        o = evaluate(Row({"test": "xpu_gpu_supported"}), ctx, kb)
        if o.value is False:
            return _finding(
                "torch",
                fw,
                "problem",
                f"torch {ver} is an XPU build but no supported Intel GPU is here",
                reasons=o.reasons,
                fix=_fix(best, "torch"),
            )
        return _finding("torch", fw, "ok", f"torch {ver} (XPU build) fits {_gpu_words(ctx, 'xpu')}")
    return _finding("torch", fw, "info", f"torch {ver} ({flavour}) is installed")


def _torch_cuda_finding(
    fw: FrameworkFacts, ver: str, flavour: str, ctx: RulesContext, kb: Knowledge, best: Optional[Recommendation]
) -> InstalledFinding:
    if not ctx.nvidia.count:
        if best and best.backend != "cpu":
            return _finding(
                "torch",
                fw,
                "problem",
                f"torch {ver} is a CUDA build, but there is no NVIDIA GPU here; "
                f"{best.recipe} fits this machine",
                fix=_fix(best, "torch"),
            )
        return _finding(
            "torch",
            fw,
            "info",
            f"torch {ver} is a CUDA build with no NVIDIA GPU here: it runs on the CPU "
            "(a CPU build is much smaller)",
        )
    row = _torch_row(kb, "torch_wheels.cuda", ver, flavour)
    cuda = f"{flavour[2:-1]}.{flavour[-1]}" if re.fullmatch(r"cu\d{3}", flavour) else None
    if row is None and cuda is None:
        return _finding("torch", fw, "info", f"torch {ver} ({flavour}) is not in mlprobe's wheel tables")
    probe_row = row or Row({"cuda": cuda, "index": flavour, "torch": ver})
    conds: List[Dict[str, object]] = [
        {"test": "cuda_driver_runs", "cuda": "{row.cuda}", "label": f"installed torch {ver}"}
    ]
    if row is not None:
        conds.append(
            {
                "test": "cuda_archs_cover",
                "archs": "{row.archs}",
                "archs_aarch64": "{row.archs_aarch64}",
                "cuda": "{row.cuda}",
                "label": f"the {flavour} wheels of torch {row.get('torch')}",
            }
        )
    o = evaluate(Row({"all": conds}), ctx, kb, probe_row)
    if o.value is False:
        return _finding(
            "torch",
            fw,
            "problem",
            f"torch {ver} cannot use {_gpu_words(ctx, 'cuda')}",
            reasons=o.reasons,
            fix=_fix(best, "torch"),
        )
    note = "" if row is not None else " (its arch list is not in mlprobe's tables: verify will tell)"
    status = "ok" if o.value else "info"
    return _finding(
        "torch",
        fw,
        status,
        f"torch {ver} ({flavour}) fits {_gpu_words(ctx, 'cuda')}{note}",
        reasons=o.warnings,
    )


def _torch_rocm_finding(
    fw: FrameworkFacts, ver: str, flavour: str, ctx: RulesContext, kb: Knowledge, best: Optional[Recommendation]
) -> InstalledFinding:
    if not ctx.amd.count:
        return _finding(
            "torch",
            fw,
            "problem",
            f"torch {ver} is a ROCm build, but there is no AMD GPU here",
            fix=_fix(best, "torch"),
        )
    row = _torch_row(kb, "torch_wheels.rocm", ver, flavour)
    conds: List[Dict[str, object]] = [{"test": "rocm_wsl_ok"}]
    approx = ""
    if row is None:
        rows = kb.at("torch_wheels.rocm")
        row = rows[-1] if rows else None
        approx = " (judged by the oldest ROCm arch list mlprobe has)"
    if row is not None:
        conds.append(
            {"test": "rocm_gfx_supported", "gfx": "{row.gfx}", "label": f"the installed ROCm wheels{approx}"}
        )
    o = evaluate(Row({"all": conds}), ctx, kb, row)
    if o.value is False:
        return _finding(
            "torch",
            fw,
            "problem",
            f"torch {ver} cannot use {_gpu_words(ctx, 'rocm')}",
            reasons=o.reasons,
            fix=_fix(best, "torch") if best and best.recipe != "torch-rocm" else [],
        )
    env = o.effects.hsa_override
    if env:
        in_effect = all(g.runtime_gfx and g.runtime_gfx != g.gfx for g in ctx.amd.targets)
        if not in_effect:
            return _finding(
                "torch",
                fw,
                "problem",
                f"torch {ver} needs HSA_OVERRIDE_GFX_VERSION={env} on {_gpu_words(ctx, 'rocm')} "
                "(unofficial), and the scan does not show it set",
                reasons=o.warnings,
                fix=[shell.set_env(k, str(v)) for k, v in (o.effects.env or {}).items()],
            )
        return _finding(
            "torch",
            fw,
            "ok",
            f"torch {ver} ({flavour}) runs on {_gpu_words(ctx, 'rocm')} through "
            f"HSA_OVERRIDE_GFX_VERSION={env} (unofficial, in effect)",
            reasons=o.warnings,
        )
    return _finding(
        "torch", fw, "ok", f"torch {ver} ({flavour}) fits {_gpu_words(ctx, 'rocm')}", reasons=o.warnings
    )


def _tf_finding(
    name: str,
    fw: FrameworkFacts,
    ctx: RulesContext,
    best: Optional[Recommendation],
    best_torch: Optional[Recommendation],
) -> InstalledFinding:
    ver = str(fw.version or "?")
    flags = ctx.cpu.flags
    if ctx.cpu.arch == "x86_64" and flags is not None and "avx" not in flags:
        fix = [shell.posix(["python", "-m", "pip", "uninstall", "-y", name])]
        if best_torch:
            fix += [f"# PyTorch runs here ({best_torch.recipe}):"] + list(best_torch.commands)
        fix.append("# or build TensorFlow from source without AVX")
        return _finding(
            name,
            fw,
            "problem",
            f"{name} {ver} is installed, but this CPU has no AVX: `import tensorflow` "
            'dies with "Illegal instruction"',
            fix=fix,
        )
    version_mm = tuple(int(x) for x in re.findall(r"\d+", ver)[:2]) if re.match(r"\d", ver) else None
    if (
        ctx.os.system == "Windows"
        and not ctx.os.wsl
        and ctx.nvidia.count
        and version_mm
        and version_mm > (2, 10)
    ):
        return _finding(
            name,
            fw,
            "info",
            f"{name} {ver} on native Windows runs on the CPU only (2.10 was the last "
            "release with native-Windows GPU support); use WSL2 for the NVIDIA GPU",
        )
    if best and best.backend == "cuda" and name == "tensorflow-cpu":
        return _finding(
            name,
            fw,
            "problem",
            f"{name} {ver} cannot use {_gpu_words(ctx, 'cuda')}; {best.recipe} can",
            fix=_fix(best, name),
        )
    if best and best.backend == "cuda":
        return _finding(
            name,
            fw,
            "info",
            f"{name} {ver} is installed; whether its CUDA libraries "
            "(tensorflow[and-cuda]) are there is not in the capture: verify will tell",
        )
    return _finding(name, fw, "ok", f"{name} {ver} fits this machine's CPU")


__all__ = ["installed_findings"]
