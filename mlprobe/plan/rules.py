"""A small, pure rules engine: facts + recipe -> Verdict, every "no" a sentence.

The condition language lives in mlprobe.plan.conditions, the named tests in mlprobe.plan.predicates, the facts
they read in mlprobe.plan.context; this module evaluates whole recipes, picking the knowledge-table row
(e.g. torch release x wheel index) that fits, and re-exports what callers use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from . import predicates, predicates_hw  # noqa: F401  (importing them registers the named tests)
from .conditions import TESTS, Effects, Outcome, evaluate, fmt, lookup, resolve
from ..model.context import RulesContext
from ..model.contract import contract, Record
from ..model.knowledge import Knowledge, Row, version
from ..model.recipe import Recipe
from .context import derive
from .predicates import arch_coverage, cuda_ceiling, plaidml_opencl_id

__all__ = [
    "TESTS",
    "Effects",
    "Outcome",
    "Variant",
    "Verdict",
    "arch_coverage",
    "cuda_ceiling",
    "derive",
    "evaluate",
    "evaluate_recipe",
    "fmt",
    "lookup",
    "plaidml_opencl_id",
    "predicates",
    "resolve",
    "version",
]


@contract
class Variant(Record):
    """One knowledge row a recipe tried (a torch release x wheel index): its label, whether it fits,
    and why not (`plan --why-not`)."""

    label: str
    fits: Optional[bool]
    reasons: Tuple[str, ...]
    unknown: Tuple[str, ...]


@dataclass
class Verdict:
    recipe: str
    fits: bool
    reasons: List[str]
    warnings: List[str]
    row: Optional[Row] = None  # the knowledge row (variant) chosen
    effects: Effects = field(default_factory=Effects)
    unknown: List[str] = field(default_factory=list)  # what could not be checked
    newer_rejected: bool = False  # a newer row of the table did not fit: pin the version
    variants: List[Variant] = field(default_factory=list)  # every row tried


# --------------------------------------------------------------------------- recipes


def evaluate_recipe(recipe: Recipe, ctx: RulesContext, kb: Knowledge) -> Verdict:
    rid = recipe.id
    base = evaluate(recipe.conditions, ctx, kb)
    reasons, warnings = list(base.reasons), list(base.warnings)
    unknown_notes = list(base.unknown)
    effects = base.effects.copy()
    row: Optional[Row] = None
    variants: List[Variant] = []
    newer_rejected = False
    value = base.value
    spec = recipe.variants
    if spec:
        rows = kb.at(spec.table)
        tried = [(r, evaluate(spec.conditions, ctx, kb, r)) for r in rows]
        label = spec.label if spec.label is not None else "{row.index}"
        variants = [Variant(fmt(label, ctx, r), o.value, tuple(o.reasons), tuple(o.unknown)) for r, o in tried]
        pick = _pick_row(tried, spec.group_by)
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
            key = spec.version_key or "torch"
            newer_rejected = any(
                rv.value is False and r2.text(key, "") != row.text(key, "") for r2, rv in tried[:i]
            )
    for w in recipe.warn_if:
        o = evaluate(w.when, ctx, kb, row)
        if o.value:
            warnings.append(fmt(w.text, ctx, row))
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


def _pick_row(tried: List[Tuple[Row, Outcome]], group_by: Optional[str]) -> Optional[Tuple[int, Tuple[Row, Outcome]]]:
    """Table order is preference order. Within one group (one torch release) a row the hardware runs
    natively beats one it runs only through compatibility ("compat"); a fully known fit beats one with
    unknown facts, but only within the same group, so an unknown Python never sends the plan back to an
    old release."""

    def rank(o: Outcome) -> int:
        if o.value is False:
            return 9
        return (0 if o.value else 2) + (1 if "compat" in o.tags else 0)

    groups: List[List[int]] = []
    prev: object = object()
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
