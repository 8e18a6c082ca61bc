"""Facts + recipes -> a ranked plan: what fits (with exact commands), what does not (with reasons),
the retired paths people still read about, and whether what is installed can use this hardware.

`build_plan(facts)` is the entry point (plan/commands.py makes a fitting recipe concrete, plan/installed.py
judges what is installed; `make_plan` plans a scan document). Ranking: expected speed on
this hardware first (the recipe's speed tier, lower on an integrated GPU), minus a penalty for
maturity (preview, paused, unmaintained) and for unofficial workarounds. Where scores tie, a framework
already installed (and able to run) in the target Python comes first, else torch, then maturity, then
id; `Plan.ranking` says in words why the first recommendation is first.
"""

from __future__ import annotations

from typing import Collection, Dict, List, Mapping, Optional, Sequence, Tuple

from ..model.facts import Facts, FrameworkFacts
from ..model.jsontypes import JsonObject, JsonValue
from ..model.plan import PLAN_SCHEMA, Plan, PlanTarget, Recommendation, Rejection, RetiredPath
from ..model.recipe import Recipe
from ..model.vocabulary import vocabulary
from ..recipes import find_recipe, knowledge, load_recipes
from .commands import InstallDetails, index_bases, install_details
from .installed import installed_findings
from .rules import Variant, Verdict, derive, evaluate, evaluate_recipe

FRAMEWORK_CHOICES = ("any",) + vocabulary().plan_frameworks()
STATUS_PENALTY = {"maintained": 0, "preview": 5, "paused": 25, "unmaintained": 30, "retired": 1000}
MATURITY = {"maintained": 0, "preview": 1, "paused": 2, "unmaintained": 3, "retired": 9}
UNOFFICIAL_PENALTY = 10


def score(recipe: Recipe, verdict: Verdict) -> int:
    eff = verdict.effects
    speed = eff.speed
    if speed is None:
        speed = (recipe.speed_integrated if recipe.speed_integrated is not None else recipe.speed) \
            if eff.integrated else recipe.speed
    s = int(speed) - STATUS_PENALTY.get(recipe.status, 0)
    if eff.unofficial:
        s -= UNOFFICIAL_PENALTY
    return s


# The framework that wins a tie when none of the tied ones is installed in the target Python.
DEFAULT_FRAMEWORK = "torch"
# The distributions that make a framework "installed" (TensorFlow ships under several names).
_DISTRIBUTIONS = {
    "torch": ("torch",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tensorflow-macos",
                   "tensorflow-rocm"),
    "jax": ("jax",),
    "keras": ("keras",),
}
# Installed but unable to start: a recipe whose failing condition says the build cannot run here
# (TensorFlow's wheels need AVX). The framework then wins no tie.
_CANNOT_RUN = {"tensorflow": "tensorflow-cpu"}


def working_frameworks(installed: Mapping[str, FrameworkFacts], verdicts: Mapping[str, Verdict],
                       failing: Collection[str] = ()) -> Tuple[str, ...]:
    """The plan frameworks installed in the target Python (the scan's list of its distributions) that
    can start there: one whose import failed where the machine's own framework enumeration says so
    (`failing`, from framework-devices.json), or whose every build is refused on this CPU (TensorFlow
    without AVX dies with "Illegal instruction" on import), is installed but does not count."""
    out: List[str] = []
    for fw in vocabulary().plan_frameworks():
        if not any(d in installed for d in _DISTRIBUTIONS.get(fw, (fw,))) or fw in failing:
            continue
        probe = _CANNOT_RUN.get(fw)
        if probe and probe in verdicts and verdicts[probe].fits is False:
            continue
        out.append(fw)
    return tuple(out)


def ranking_reason(recommended: Sequence[Recommendation], working: Sequence[str],
                   failing: Collection[str] = ()) -> Optional[str]:
    """Why the first recommendation is first, in one sentence (None when nothing fits)."""
    if not recommended:
        return None
    first = recommended[0]
    tied = [e for e in recommended[1:] if e.score == first.score and e.framework != first.framework]
    if not tied:
        return f"{first.recipe} first: the highest score on this hardware ({first.score})"
    names = ", ".join(dict.fromkeys(e.recipe for e in tied))
    if first.framework in working:
        why = f"{first.framework} is already installed in the target Python"
    elif first.framework == DEFAULT_FRAMEWORK:
        broke = [fw for fw in dict.fromkeys([first.framework, *(e.framework for e in tied)]) if fw in failing]
        why = (f"no tied framework is installed in the target Python, so {DEFAULT_FRAMEWORK} "
               "(the default) goes first") if not broke else (
            f"no tied framework is installed and starts in the target Python ({', '.join(map(str, broke))}: "
            f"its import failed there), so {DEFAULT_FRAMEWORK} (the default) goes first")
    else:
        why = "by maturity and name"
    return f"{first.recipe} first: tied with {names} on score {first.score}; {why}"


def _top_in_ranking_order(recommended: Sequence[Recommendation], framework: str) -> Dict[str, Optional[str]]:
    """Each planned framework's best recipe, the frameworks in the order of the ranking (those with
    nothing that fits last), so that "Best fit" reads like the numbered list."""
    found: Dict[str, Optional[str]] = {}
    for e in recommended:
        for fw in find_recipe(e.recipe).frameworks:
            if fw in vocabulary().plan_frameworks() and framework in ("any", fw):
                found.setdefault(fw, e.recipe)
    for fw in vocabulary().plan_frameworks():
        if framework in ("any", fw):
            found.setdefault(fw, None)
    return found


def make_plan(
    report: Mapping[str, JsonValue],
    framework: str = "any",
    python: Optional[str] = None,
    index_urls: Optional[Mapping[str, str]] = None,
    env: Optional[Mapping[str, str]] = None,
) -> JsonObject:
    """The plan document (`plan --json`) of a scan document (`scan --json`, a file): read into Facts at
    the door, planned, written through the Plan contract."""
    return build_plan(Facts.from_report(report), framework, python, index_urls, env).to_json()


def _recommendation(r: Recipe, v: Verdict, python_known: bool, details: InstallDetails, score_: int) -> Recommendation:
    return Recommendation(
        recipe=r.id, title=r.title, framework=r.framework, backend=r.backend, status=r.status, score=score_,
        index=details.index, index_url=details.index_url, extra_index_urls=details.extra_index_urls,
        version=details.version, packages=details.packages, env=details.env, files=details.files,
        steps=details.steps, commands=details.commands, verify=details.verify,
        prerequisites=(v.effects.prerequisite,) if v.effects.prerequisite else (),
        warnings=tuple(dict.fromkeys([*r.warnings, *v.warnings])),
        unknown=tuple(u for u in v.unknown
                      if python_known or not u.startswith("the target Python is unknown")),
        device=details.verify.device, device_name=v.effects.device_name or None, notes=r.notes,
        sources=tuple(s.id for s in r.sources),
    )


def build_plan(
    facts: Facts,
    framework: str = "any",
    python: Optional[str] = None,
    index_urls: Optional[Mapping[str, str]] = None,
    env: Optional[Mapping[str, str]] = None,
    failing: Collection[str] = (),
) -> Plan:
    """The plan for the scanned facts. `failing`: frameworks installed in the target Python whose
    import failed there (they win no tie). `python` ("3.11") overrides the target interpreter;
    `index_urls` ({"pytorch": URL}) overrides knowledge/indexes.json and `env`, the environment
    variables the caller read (MLPROBE_PYTORCH_INDEX_URL, named in indexes.json): the planner itself
    never reads the process environment."""
    if framework not in FRAMEWORK_CHOICES:
        raise ValueError(f"framework must be one of {FRAMEWORK_CHOICES}")
    kb = knowledge()
    ctx = derive(facts, kb, python)
    bases = index_bases(kb, index_urls, env or {})
    recommended: List[Recommendation] = []
    rejected: List[Rejection] = []
    retired: List[RetiredPath] = []
    verdicts: Dict[str, Verdict] = {}
    missing_index: Dict[str, Optional[str]] = {}
    for r in load_recipes():
        if framework != "any" and framework not in r.frameworks:
            continue
        v = evaluate_recipe(r, ctx, kb)
        verdicts[r.id] = v
        if r.status == "retired":
            relevant = r.relevant_when is not None and evaluate(r.relevant_when, ctx, kb).value is True
            retired.append(RetiredPath(r.id, r.title, r.framework, r.backend, r.status, relevant=relevant,
                                       summary=r.summary, successor=r.successor,
                                       sources=tuple(s.id for s in r.sources)))
            rejected.append(Rejection(r.id, r.title, r.framework, r.backend, r.status,
                                      reasons=(f"retired; today: {r.successor}", *v.reasons)))
            continue
        if not v.fits:
            rejected.append(Rejection(r.id, r.title, r.framework, r.backend, r.status,
                                      reasons=tuple(v.reasons or ["does not fit (no reason recorded)"])))
            continue
        details = install_details(r, v, ctx, kb, bases)
        if details.index and not details.index_url:
            b = bases.get(r.install.index.id if r.install.index else "")
            missing_index[b.placeholder if b else "<index>"] = b.env if b else None
        recommended.append(_recommendation(r, v, ctx.python.version is not None, details, score(r, v)))
    working = working_frameworks(ctx.frameworks, verdicts, failing)
    recommended.sort(key=lambda e: (-(e.score or 0), e.framework not in working, e.framework != DEFAULT_FRAMEWORK,
                                    MATURITY.get(e.status or "", 5), e.recipe))
    rejected.sort(key=lambda e: (e.status == "retired", e.framework, e.recipe))
    top = _top_in_ranking_order(recommended, framework)
    installed = installed_findings(ctx, kb, verdicts, recommended)
    warnings = list(ctx.inferred)
    for placeholder, env_name in missing_index.items():
        warnings.append(
            f"{placeholder} in the commands stands for a wheel index whose URL this mlprobe's knowledge "
            f"lacks; set {env_name} to its base URL (or pass --index-url to mlprobe install)"
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
        schema=PLAN_SCHEMA,
        framework=framework,
        target=PlanTarget(python=ctx.python.version, python_source=python_source, os=ctx.os.system,
                          wsl=ctx.os.wsl, arch=ctx.cpu.arch),
        top=top,
        recommended=tuple(recommended),
        rejected=tuple(rejected),
        retired=tuple(retired),
        installed=tuple(installed),
        warnings=tuple(warnings),
        ranking=ranking_reason(recommended, working, failing),
    )


def why_not(plan: Plan, name: str) -> JsonObject:
    """The `plan --why-not` document (what `plan --why-not --json` prints): one recipe explained, fits
    (and how), rejected (and why), or retired (and what replaced it)."""
    recipe = find_recipe(name)
    rid = recipe.id
    out: JsonObject = {
        "recipe": rid,
        "title": recipe.title,
        "framework": recipe.framework,
        "backend": recipe.backend,
        "status": recipe.status,
        "summary": recipe.summary,
        "sources": [{"id": s.id, "reference": s.reference} for s in recipe.sources],
    }
    rank = next((i for i, e in enumerate(plan.recommended, 1) if e.recipe == rid), None)
    rej = next((e for e in plan.rejected if e.recipe == rid), None)
    if rank is not None:
        out.update(verdict="fits", rank=rank, entry=plan.recommended[rank - 1].to_json())
    elif rej:
        out.update(
            verdict="retired" if recipe.status == "retired" else "rejected",
            reasons=list(rej.reasons),
            successor=recipe.successor,
        )
    else:
        out.update(verdict="not evaluated", reasons=[f"not part of a --framework {plan.framework} plan"])
    return out


def explain_variants(facts: Facts, name: str, python: Optional[str] = None) -> List[Variant]:
    """Every knowledge row a recipe tried (torch release x index), with its reasons (for --why-not)."""
    kb = knowledge()
    ctx = derive(facts, kb, python)
    return evaluate_recipe(find_recipe(name), ctx, kb).variants


__all__ = ["DEFAULT_FRAMEWORK", "FRAMEWORK_CHOICES", "build_plan", "explain_variants", "make_plan", "ranking_reason", "score", "why_not", "working_frameworks"]
