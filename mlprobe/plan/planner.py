"""Facts + recipes -> a ranked plan: what fits (with exact commands), what does not (with reasons),
the retired paths people still read about, and whether what is installed can use this hardware.

`make_plan(report)` is the one entry point install, verify and report call. Ranking: expected speed on
this hardware first (the recipe's speed tier, lower on an integrated GPU), minus a penalty for
maturity (preview, paused, unmaintained) and for unofficial workarounds; then maturity, then id.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..recipes import find_recipe, knowledge, load_recipes
from .rules import Effects, Variant, Verdict, derive, evaluate, evaluate_recipe, resolve
from ..model.context import RulesContext
from ..model.facts import Facts, FrameworkFacts
from ..model.knowledge import Knowledge, Row
from ..model.plan import PLAN_VERSION, InstalledFinding, Plan, PlanTarget, Recommendation, Rejection, RetiredPath
from ..model import shell
from ..model.vocabulary import vocabulary
from ..urls import check_url, join_path, strip_slash

FRAMEWORK_CHOICES = ("any",) + vocabulary().plan_frameworks()
STATUS_PENALTY = {"maintained": 0, "preview": 5, "paused": 25, "unmaintained": 30, "retired": 1000}
MATURITY = {"maintained": 0, "preview": 1, "paused": 2, "unmaintained": 3, "retired": 9}
UNOFFICIAL_PENALTY = 10


def provides(recipe: Dict[str, Any]) -> List[str]:
    return list(dict.fromkeys([recipe["framework"]] + list(recipe.get("provides", []))))


def _wanted(recipe: Dict[str, Any], framework: str) -> bool:
    return framework == "any" or framework in provides(recipe)


def score(recipe: Dict[str, Any], verdict: Verdict) -> int:
    eff = verdict.effects
    speed = eff.speed
    if speed is None:
        speed = recipe.get("speed_integrated", recipe["speed"]) if eff.integrated else recipe["speed"]
    s = int(speed) - STATUS_PENALTY.get(recipe["status"], 0)
    if eff.unofficial:
        s -= UNOFFICIAL_PENALTY
    return s


# --------------------------------------------------------------------------- install details


def _index_bases(
    kb: Knowledge, index_urls: Optional[Mapping[str, str]], env: Mapping[str, str]
) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for row in kb.rows("indexes", "indexes"):
        rid = str(row.get("id"))
        url = (index_urls or {}).get(rid)
        origin = "index_urls"
        env_name = row.text("env")
        if url is None and env_name:
            url = env.get(env_name) or None
            origin = env_name
        if url is not None:
            url = check_url(url, origin)
        out[rid] = {
            "url": strip_slash(url or row.text("url") or "") or None,
            "mirror": url is not None,
            "placeholder": row.text("placeholder", f"<{rid}-index>"),
            "env": env_name,
        }
    return out


def _render(value: object, ctx: RulesContext, row: Optional[Row], effects: Effects) -> object:
    if isinstance(value, dict):
        return {k: _render(v, ctx, row, effects) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, ctx, row, effects) for v in value]
    return resolve(value, ctx, row, effects)


def install_details(
    recipe: Dict[str, Any], verdict: Verdict, ctx: RulesContext, kb: Knowledge, bases: Dict[str, Dict[str, Any]]
) -> Dict[str, Any]:
    inst = recipe.get("install") or {}
    row, eff = verdict.row, verdict.effects
    pkgs_t = (
        inst.get("pinned_packages")
        if (verdict.newer_rejected and inst.get("pinned_packages"))
        else inst.get("packages", [])
    )
    packages = [str(_render(p, ctx, row, eff)) for p in pkgs_t or []]
    index = index_url = None
    idx = inst.get("index")
    if idx:
        suffix = _render(idx["suffix"], ctx, row, eff)
        if suffix:
            index = str(suffix)
            base = bases.get(idx["id"], {})
            index_url = join_path(base["url"], index) if base.get("url") else None
    extra_index_urls = _extra_indexes(inst, ctx, kb, row, eff, bases)
    env: Dict[str, str] = dict(inst.get("env") or {})
    env.update({k: str(v) for k, v in (eff.env or {}).items()})
    files = []
    for f in inst.get("files", []):
        obj = _render(f["json"], ctx, row, eff)
        files.append(
            {"path": f["path"], "json": obj, "content": json.dumps(obj, indent=2) + "\n", "why": f.get("why")}
        )
    steps = []
    for st in inst.get("steps", []):
        when = st.get("when")
        if when is None or evaluate(Row(when), ctx, kb, row).value is not False:
            steps.append({"shim": st["shim"], "why": st.get("why")})
    version_key = (recipe.get("variants") or {}).get("version_key")
    version = str(row.get(version_key)) if row and version_key and row.get(version_key) else None
    windows = ctx.os.system == "Windows" and not ctx.os.wsl
    base = bases.get(idx["id"], {}) if idx else {}
    commands = _commands(packages, index, index_url, base, steps, files, env, windows, extra_index_urls)
    verify = _render(recipe.get("verify") or {}, ctx, row, eff)
    return {
        "index": index,
        "index_url": index_url,
        "extra_index_urls": extra_index_urls,
        "version": version,
        "packages": packages,
        "env": env,
        "files": files,
        "steps": steps,
        "commands": commands,
        "verify": verify,
    }


def _extra_indexes(inst: Dict[str, Any], ctx: RulesContext, kb: Knowledge, row: Optional[Row],
                   eff: Effects, bases: Dict[str, Dict[str, Any]]) -> List[str]:
    """The recipe's `extra_indexes` that apply here (their `when` holds or is unknown), as URLs: a
    package set whose packages live on two indexes (torch-npu on the default index pins
    torch==X+cpu, which only PyTorch's cpu index publishes). An index without a URL (its base was
    not configured) shows as its placeholder, like the main index."""
    urls: List[str] = []
    for ex in inst.get("extra_indexes") or []:
        when = ex.get("when")
        if when is not None and evaluate(Row(when), ctx, kb, row).value is False:
            continue
        suffix = str(_render(ex["suffix"], ctx, row, eff) or "")
        base = bases.get(ex["id"], {})
        urls.append(join_path(base["url"], suffix) if base.get("url")
                    else f"{base.get('placeholder', '<index>')}/{suffix}")
    return urls


def _commands(packages: List[str], index: Optional[str], index_url: Optional[str], base: Dict[str, Any],
              steps: List[Dict[str, Any]], files: List[Dict[str, Any]], env: Dict[str, str],
              windows: bool, extra_index_urls: Sequence[str] = ()) -> List[str]:
    """The steps a person pastes, each word quoted for the shell (PowerShell on Windows, POSIX
    elsewhere): package names, the shim's path, the settings file's text and every variable's value
    come from recipes and from the scanned machine (a device name), so none is trusted as shell text."""
    commands: List[str] = []
    if packages:
        argv = ["python", "-m", "pip", "install", *packages]
        if index:
            argv += ["--index-url", index_url or f"{base.get('placeholder', '<index>')}/{index}"]
        for url in extra_index_urls:
            argv += ["--extra-index-url", url]
        commands.append(shell.command(argv, windows))
    for st in steps:
        if st["shim"] == "plaidml-collections":
            # The shim file is standard library only: the environment's own python runs it from
            # where mlprobe is installed, without mlprobe being installed there.
            import os

            from ..shims import plaidml_compat

            commands.append(shell.command(["python", os.path.abspath(plaidml_compat.__file__)], windows))
    for f in files:
        commands.append(shell.write_file(f["path"], json.dumps(f["json"]), windows))
    for k, v in env.items():
        commands.append(shell.set_env(k, v, windows))
    return commands


# --------------------------------------------------------------------------- the plan


def make_plan(
    report: Mapping[str, Any],
    framework: str = "any",
    python: Optional[str] = None,
    index_urls: Optional[Mapping[str, str]] = None,
    env: Optional[Mapping[str, str]] = None,
) -> Dict[str, Any]:
    """The plan document (`plan --json`) of a scan document (`scan --json`, a file): read into Facts at
    the door, planned, written through the Plan contract."""
    return build_plan(Facts.from_report(report), framework, python, index_urls, env).to_json()


def build_plan(
    facts: Facts,
    framework: str = "any",
    python: Optional[str] = None,
    index_urls: Optional[Mapping[str, str]] = None,
    env: Optional[Mapping[str, str]] = None,
) -> Plan:
    """The plan for the scanned facts. `python` ("3.11") overrides the target interpreter;
    `index_urls` ({"pytorch": URL}) overrides knowledge/indexes.json and `env`, the environment
    variables the caller read (MLPROBE_PYTORCH_INDEX_URL, named in indexes.json): the planner itself
    never reads the process environment."""
    if framework not in FRAMEWORK_CHOICES:
        raise ValueError(f"framework must be one of {FRAMEWORK_CHOICES}")
    kb = knowledge()
    ctx = derive(facts, kb, python)
    bases = _index_bases(kb, index_urls, env or {})
    recipes = load_recipes()
    recommended: List[Dict[str, Any]] = []
    rejected: List[Rejection] = []
    retired: List[RetiredPath] = []
    verdicts: Dict[str, Verdict] = {}
    missing_index: Dict[str, Any] = {}
    for r in recipes:
        if not _wanted(r, framework):
            continue
        v = evaluate_recipe(r, ctx, kb)
        verdicts[r["id"]] = v
        base = {
            "recipe": r["id"],
            "title": r["title"],
            "framework": r["framework"],
            "backend": r["backend"],
            "status": r["status"],
        }
        if r["status"] == "retired":
            rel = r.get("relevant_when")
            relevant = isinstance(rel, dict) and evaluate(Row(rel), ctx, kb).value is True
            retired.append(RetiredPath(**base, relevant=relevant, summary=r.get("summary"),
                                       successor=r.get("successor"), sources=tuple(s["id"] for s in r["sources"])))
            rejected.append(Rejection(**base, reasons=(f"retired; today: {r.get('successor')}", *v.reasons)))
            continue
        if not v.fits:
            rejected.append(Rejection(**base, reasons=tuple(v.reasons or ["does not fit (no reason recorded)"])))
            continue
        entry = dict(base, score=score(r, v))
        entry.update(install_details(r, v, ctx, kb, bases))
        warnings = list(r.get("warnings", [])) + v.warnings
        if entry["index"] and not entry["index_url"]:
            b = bases.get((r.get("install") or {}).get("index", {}).get("id", ""), {})
            missing_index[b.get("placeholder", "<index>")] = b.get("env")
        entry["warnings"] = list(dict.fromkeys(warnings))
        entry["unknown"] = [
            u
            for u in v.unknown
            if not (ctx.python.version is None and u.startswith("the target Python is unknown"))
        ]
        entry["device"] = (entry.get("verify") or {}).get("device")
        entry["device_name"] = v.effects.device_name
        entry["notes"] = list(r.get("notes", []))
        entry["sources"] = [s["id"] for s in r["sources"]]
        recommended.append(entry)
    recommended.sort(key=lambda e: (-e["score"], MATURITY.get(e["status"], 5), e["recipe"]))
    rejected.sort(key=lambda e: (e.status == "retired", e.framework, e.recipe))
    top = {}
    for fw in vocabulary().plan_frameworks():
        if framework in ("any", fw):
            hit = next((e for e in recommended if fw in provides(find_recipe(e["recipe"]))), None)
            top[fw] = hit["recipe"] if hit else None
    installed = installed_findings(ctx, kb, verdicts, recommended, bases)
    warnings = list(ctx.inferred)
    for placeholder, env in missing_index.items():
        warnings.append(
            f"{placeholder} in the commands stands for a wheel index whose URL this mlprobe's knowledge "
            f"lacks; set {env} to its base URL (or pass --index-url to mlprobe install)"
        )
    undriven = ctx.nvidia.undriven
    if undriven:
        warnings.append(
            f"the NVIDIA driver (nvidia-smi) sees {ctx.nvidia.count} GPU(s) but lspci lists "
            f"{ctx.nvidia.count + len(undriven)}: planned for the {ctx.nvidia.count} the driver "
            "sees; not driven: " + ", ".join(f"{g.name or 'NVIDIA GPU'} at {g.pci_bus_id or '?'}"
                                              for g in undriven))
    if ctx.python.version is None:
        warnings.append(
            "the target Python is unknown (the scan has none): recipes were checked without it; "
            "pass --python X.Y"
        )
    overrides = facts.overrides
    python_source = ctx.python.source
    if python_source == "scan" and "MLPROBE_OVERRIDE_PYTHON_VERSION" in overrides:
        python_source = "overridden by MLPROBE_OVERRIDE_PYTHON_VERSION"
    for key, value in overrides.items():
        warnings.append(f"overridden: {key}={value}; this plan is for that, not for what the machine has")
    return Plan(
        plan_version=PLAN_VERSION,
        framework=framework,
        target=PlanTarget(python=ctx.python.version, python_source=python_source, os=ctx.os.system,
                          wsl=ctx.os.wsl, arch=ctx.cpu.arch),
        top=top,
        recommended=tuple(Recommendation.from_json(e) for e in recommended),
        rejected=tuple(rejected),
        retired=tuple(retired),
        installed=tuple(installed),
        warnings=tuple(warnings),
    )


def why_not(plan: Plan, name: str) -> Dict[str, Any]:
    """The `plan --why-not` document: one recipe explained, fits (and how), rejected (and why), or
    retired (and what replaced it)."""
    recipe = find_recipe(name)
    rid = recipe["id"]
    out: Dict[str, Any] = {
        "recipe": rid,
        "title": recipe["title"],
        "framework": recipe["framework"],
        "backend": recipe["backend"],
        "status": recipe["status"],
        "summary": recipe.get("summary"),
        "sources": recipe["sources"],
    }
    rank = next((i for i, e in enumerate(plan.recommended, 1) if e.recipe == rid), None)
    rej = next((e for e in plan.rejected if e.recipe == rid), None)
    if rank is not None:
        out.update(verdict="fits", rank=rank, entry=plan.recommended[rank - 1].to_json())
    elif rej:
        out.update(
            verdict="retired" if recipe["status"] == "retired" else "rejected",
            reasons=list(rej.reasons),
            successor=recipe.get("successor"),
        )
    else:
        out.update(verdict="not evaluated", reasons=[f"not part of a --framework {plan.framework} plan"])
    return out


def explain_variants(facts: Facts, name: str, python: Optional[str] = None) -> List[Variant]:
    """Every knowledge row a recipe tried (torch release x index), with its reasons (for --why-not)."""
    kb = knowledge()
    ctx = derive(facts, kb, python)
    return evaluate_recipe(find_recipe(name), ctx, kb).variants


# --------------------------------------------------------------------------- installed vs fits


def _top_of(recommended: Sequence[Dict[str, Any]], framework: str) -> Optional[Dict[str, Any]]:
    return next((e for e in recommended if e["framework"] == framework), None)


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


def _fix(best: Optional[Dict[str, Any]], uninstall: str) -> List[str]:
    if not best:
        return []
    return [shell.posix(["python", "-m", "pip", "uninstall", "-y", uninstall])] + list(best["commands"])


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
    recommended: Sequence[Dict[str, Any]],
    bases: Dict[str, Dict[str, Any]],
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
            extra = [w for w in recipe.get("warnings", [])][:1]
            out.append(
                _finding(
                    name,
                    fws[name],
                    "ok" if recipe["status"] == "maintained" else "info",
                    f"{name} fits this machine"
                    + (f" ({recipe['status']})" if recipe["status"] != "maintained" else ""),
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
    fw: FrameworkFacts, ctx: RulesContext, kb: Knowledge, best: Optional[Dict[str, Any]]
) -> InstalledFinding:
    ver = str(fw.version or "?")
    flavour = str(fw.flavour or "")
    darwin = ctx.os.system == "Darwin"
    gpu_best = best if best and best["backend"] in ("cuda", "rocm", "xpu", "mps", "directml") else None
    if not flavour:
        return _finding(
            "torch",
            fw,
            "info",
            f"torch {ver} is installed; its build (CPU, CUDA, ROCm) is not in the capture, verify will tell",
        )
    if flavour == "cpu" and darwin:
        if best and best["backend"] == "mps":
            return _finding(
                "torch", fw, "ok", f"torch {ver} (the macOS build, with MPS) fits: {best['recipe']}"
            )
        return _finding("torch", fw, "ok", f"torch {ver} (the macOS build) fits this Mac's CPU")
    if flavour == "cpu":
        if gpu_best and gpu_best["backend"] in ("cuda", "rocm", "xpu"):
            return _finding(
                "torch",
                fw,
                "problem",
                f"torch {ver} is a CPU-only build, but this machine has "
                f"{_gpu_words(ctx, gpu_best['backend'])}"
                f" that {gpu_best['recipe']} can use",
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
    fw: FrameworkFacts, ver: str, flavour: str, ctx: RulesContext, kb: Knowledge, best: Optional[Dict[str, Any]]
) -> InstalledFinding:
    if not ctx.nvidia.count:
        if best and best["backend"] != "cpu":
            return _finding(
                "torch",
                fw,
                "problem",
                f"torch {ver} is a CUDA build, but there is no NVIDIA GPU here; "
                f"{best['recipe']} fits this machine",
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
    fw: FrameworkFacts, ver: str, flavour: str, ctx: RulesContext, kb: Knowledge, best: Optional[Dict[str, Any]]
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
            fix=_fix(best, "torch") if best and best["recipe"] != "torch-rocm" else [],
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
    best: Optional[Dict[str, Any]],
    best_torch: Optional[Dict[str, Any]],
) -> InstalledFinding:
    ver = str(fw.version or "?")
    flags = ctx.cpu.flags
    if ctx.cpu.arch == "x86_64" and flags is not None and "avx" not in flags:
        fix = [shell.posix(["python", "-m", "pip", "uninstall", "-y", name])]
        if best_torch:
            fix += [f"# PyTorch runs here ({best_torch['recipe']}):"] + list(best_torch["commands"])
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
    if best and best["backend"] == "cuda" and name == "tensorflow-cpu":
        return _finding(
            name,
            fw,
            "problem",
            f"{name} {ver} cannot use {_gpu_words(ctx, 'cuda')}; {best['recipe']} can",
            fix=_fix(best, name),
        )
    if best and best["backend"] == "cuda":
        return _finding(
            name,
            fw,
            "info",
            f"{name} {ver} is installed; whether its CUDA libraries "
            "(tensorflow[and-cuda]) are there is not in the capture: verify will tell",
        )
    return _finding(name, fw, "ok", f"{name} {ver} fits this machine's CPU")
