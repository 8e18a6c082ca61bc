"""The condition language of the recipes: sentence templates, three-valued combinators, fact
comparisons, and the registry of named tests (mlprobe.plan.predicates fills it).

    {"all": [c, ...]}   {"any": [c, ...], "because": "..."}   {"not": c, "because": "..."}
    {"fact": "cpu.flags", "contains": "avx", "because": "..."}
    {"fact": "os.system", "in": ["Linux", "Windows"]}       ("equals", "gte", "lte", "gt", "lt")
    {"fact": "python.version", "specifier": ">=3.10,<3.15"}  (PEP 440, through packaging)
    {"test": "cuda_archs_cover", "archs": "{row.archs}"}     (a named predicate over sourced tables)

Logic is three-valued: a fact the scan could not read is unknown (None), never a silent yes or no.
An unknown condition does not reject a recipe; it is listed as not checked. `because` and `unknown`
are sentence templates: `{a.b}` reads the facts, `{row.x}` the knowledge-table row being tried,
`{value}` the fact's value. `"stop": true` makes a condition a gate: when it fails, the rest of its
`all` is not evaluated (it would only repeat the same "no"). Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.version import Version

from ..model.context import RulesContext
from ..model.knowledge import Knowledge, Row, version

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")


class Effects:
    """What a condition that fits adds to the install: environment variables (`env`), the device it
    chose and how (`device_name`, `device_id`, `integrated`, `experimental`; `{effects.device_id}` in a
    recipe reads them), and hints for the ranking (`speed` overrides the recipe's tier, `unofficial`,
    `hsa_override`, `amd_device_extra`). A later condition's word on a name wins (`update`). Kept as
    one small map behind typed properties: outcomes are made and merged by the thousand per plan."""

    __slots__ = ("said",)
    NAMES = ("env", "device_name", "device_id", "integrated", "unofficial", "experimental", "speed",
             "hsa_override", "amd_device_extra", "prerequisite")

    def __init__(self, env: Optional[Dict[str, str]] = None, device_name: Optional[str] = None,
                 device_id: Optional[str] = None, integrated: Optional[bool] = None,
                 unofficial: Optional[bool] = None, experimental: Optional[bool] = None,
                 speed: Optional[int] = None, hsa_override: Optional[str] = None,
                 amd_device_extra: Optional[str] = None, prerequisite: Optional[str] = None) -> None:
        self.said: Dict[str, object] = {}
        for name, value in (("env", env), ("device_name", device_name), ("device_id", device_id),
                            ("integrated", integrated), ("unofficial", unofficial),
                            ("experimental", experimental), ("speed", speed), ("hsa_override", hsa_override),
                            ("amd_device_extra", amd_device_extra), ("prerequisite", prerequisite)):
            if value is not None:
                self.said[name] = value

    def get(self, name: str) -> object:
        return self.said.get(name)

    def update(self, other: "Effects") -> None:
        """What `other` said wins over what this one said."""
        if other.said:
            self.said.update(other.said)

    def copy(self) -> "Effects":
        out = Effects()
        out.said = {k: dict(v) if k == "env" and isinstance(v, dict) else v for k, v in self.said.items()}
        return out

    @property
    def env(self) -> Optional[Dict[str, str]]:
        v = self.said.get("env")
        return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else None

    @env.setter
    def env(self, value: Optional[Dict[str, str]]) -> None:
        self.said["env"] = value

    def _text(self, name: str) -> Optional[str]:
        v = self.said.get(name)
        return None if v is None else str(v)

    def _flag(self, name: str) -> Optional[bool]:
        v = self.said.get(name)
        return None if v is None else bool(v)

    @property
    def device_name(self) -> Optional[str]:
        return self._text("device_name")

    @property
    def device_id(self) -> Optional[str]:
        return self._text("device_id")

    @property
    def integrated(self) -> Optional[bool]:
        return self._flag("integrated")

    @integrated.setter
    def integrated(self, value: Optional[bool]) -> None:
        self.said["integrated"] = value

    @property
    def unofficial(self) -> Optional[bool]:
        return self._flag("unofficial")

    @unofficial.setter
    def unofficial(self, value: Optional[bool]) -> None:
        self.said["unofficial"] = value

    @property
    def experimental(self) -> Optional[bool]:
        return self._flag("experimental")

    @property
    def speed(self) -> Optional[int]:
        v = self.said.get("speed")
        return v if isinstance(v, int) else None

    @property
    def hsa_override(self) -> Optional[str]:
        return self._text("hsa_override")

    @hsa_override.setter
    def hsa_override(self, value: Optional[str]) -> None:
        self.said["hsa_override"] = value

    @property
    def amd_device_extra(self) -> Optional[str]:
        return self._text("amd_device_extra")

    @amd_device_extra.setter
    def amd_device_extra(self, value: Optional[str]) -> None:
        self.said["amd_device_extra"] = value

    @property
    def prerequisite(self) -> Optional[str]:
        """A step the user takes before the install (a vendor toolkit the wheels do not bring)."""
        return self._text("prerequisite")


@dataclass
class Outcome:
    value: Optional[bool]  # True fits, False rejects, None unknown
    reasons: List[str] = field(default_factory=list)  # why not (when False)
    warnings: List[str] = field(default_factory=list)  # caveats, and what could not be checked
    effects: Effects = field(default_factory=Effects)  # env vars, chosen device, speed hints
    tags: List[str] = field(default_factory=list)  # e.g. "compat" (CUDA minor-version compatibility)
    vars: Dict[str, str] = field(default_factory=dict)  # extra {names} for the condition's `because`
    unknown: List[str] = field(default_factory=list)  # what could not be checked (facts not in the scan)


# --------------------------------------------------------------------------- values and templates


def lookup(ctx: object, path: str, row: Optional[Row] = None, effects: Optional[Effects] = None) -> object:
    """The value at a dotted path: `row.x` in the knowledge row being tried, `effects.x` in what the
    conditions chose, anything else in the rules context (its records' fields, its maps' keys)."""
    parts = path.split(".")
    cur: object
    if parts[0] == "row":
        cur = row if row is not None else Row()
        parts = parts[1:]
    elif parts[0] == "effects" and effects is not None:
        cur = effects
        parts = parts[1:]
    else:
        cur = ctx
    for p in parts:
        if isinstance(cur, (Row, dict, Effects)):
            cur = cur.get(p)
        elif p in getattr(type(cur), "__slots__", ()) or p in getattr(cur, "__dataclass_fields__", ()):
            cur = getattr(cur, p)  # a field of a context view, of the effects, of a scan record (OsFacts)
        elif isinstance(cur, Mapping):
            cur = cur.get(p)
        else:
            return None
        if cur is None:
            return None
    return cur


def _show(value: object) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple, set)):
        return ", ".join(_show(v) for v in value) if value else "none"
    return str(value)


def fmt(template: str, ctx: object, row: Optional[Row] = None, effects: Optional[Effects] = None,
        values: Optional[Mapping[str, object]] = None) -> str:
    """The sentence with its `{path}` placeholders filled from the facts, the row, the effects, and
    `values` (`{value}`, `{detail}`, a named test's own words)."""
    extra = values or {}

    def sub(m: "re.Match[str]") -> str:
        key = m.group(1)
        if key in extra:
            return _show(extra[key])
        return _show(lookup(ctx, key, row, effects))

    return _PLACEHOLDER.sub(sub, template)


def resolve(value: object, ctx: object, row: Optional[Row] = None, effects: Optional[Effects] = None) -> object:
    """A condition operand: "{row.os}" alone gives the raw value (a list stays a list)."""
    if isinstance(value, str):
        m = _PLACEHOLDER.fullmatch(value)
        if m:
            return lookup(ctx, m.group(1), row, effects)
        if "{" in value:
            return fmt(value, ctx, row, effects)
    return value


def strs(value: object) -> Tuple[str, ...]:
    """A resolved operand as a list of strings (a list's items as text; nothing else is a list)."""
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()


_SIMPLE_CLAUSE = re.compile(r"^\s*(>=|<=|>|<|==|!=)\s*(\d+(?:\.\d+)*)\s*$")
_COMPARE: Dict[str, Callable[[Version, Version], bool]] = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


@lru_cache(maxsize=512)
def _clauses(spec: str) -> Optional[Tuple[Tuple[str, Version], ...]]:
    """A specifier made only of release-number comparisons (">=3.10,<3.16"), parsed; None otherwise."""
    out = []
    for part in spec.split(","):
        m = _SIMPLE_CLAUSE.match(part)
        if not m:
            return None
        out.append((m.group(1), Version(m.group(2))))
    return tuple(out)


def spec_contains(spec: str, value: Version) -> bool:
    """PEP 440 specifier match. The plain comparisons the knowledge tables use are answered with
    packaging's Version ordering directly (packaging.specifiers costs ~15 ms to import, a tenth of the
    plan's time budget); anything else (~=, wildcards, ===) goes through packaging's SpecifierSet.
    tests/test_rules.py checks that both agree."""
    clauses = _clauses(spec)
    if clauses is not None and not value.is_prerelease:
        return all(_COMPARE[op](value, bound) for op, bound in clauses)
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(spec).contains(value, prereleases=True)
    except InvalidSpecifier:
        raise ValueError(f"bad version specifier {spec!r}") from None


def cc_tuple(text: str) -> Tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(re.sub(r"\D.*$", "", minor) or 0)


# --------------------------------------------------------------------------- combinators and leaves


def evaluate(cond: Row, ctx: RulesContext, kb: Knowledge, row: Optional[Row] = None) -> Outcome:
    doc = cond.doc  # the condition's own JSON object: read directly here, the hottest loop of a plan
    if "all" in doc:
        parts = []
        for c in cond.rows("all"):
            parts.append(evaluate(c, ctx, kb, row))
            if parts[-1].value is False and c.doc.get("stop"):
                break  # a gate: what follows would only repeat the same "no" in other words
        return _all(parts)
    if "fact" in doc and not ("any" in doc or "not" in doc or "test" in doc):
        return _leaf(cond, ctx, row)  # the common leaf first; the order below is the language's
    because, unknown = doc.get("because"), doc.get("unknown")
    because = because if isinstance(because, str) else None
    unknown = unknown if isinstance(unknown, str) else None
    if "any" in doc:
        out = _any([evaluate(c, ctx, kb, row) for c in cond.rows("any")])
        if out.value is False and because:
            out.reasons = [fmt(because, ctx, row)]
        if out.value is None and unknown is not None:
            out.unknown = [fmt(unknown, ctx, row)]
        return out
    if "not" in doc:
        inner = evaluate(cond.row("not"), ctx, kb, row)
        if inner.value is None:
            return Outcome(None, unknown=[fmt(unknown or str(because), ctx, row)])
        if inner.value:
            return Outcome(False, reasons=[fmt(str(because), ctx, row)])
        return Outcome(True)
    if "test" in doc:
        name = str(doc.get("test"))
        fn = TESTS.get(name)
        if fn is None:
            raise KeyError(f"unknown test {name!r}")
        out = fn(cond, ctx, kb, row)
        if out.value is False and because:
            detail = "; ".join(out.reasons)
            out.reasons = [fmt(because, ctx, row, values={"detail": detail, **out.vars})]
        return out
    if "fact" in doc:
        return _leaf(cond, ctx, row)
    raise KeyError(f"not a condition: {sorted(doc)}")


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
            return Outcome(True, warnings=list(p.warnings), effects=p.effects.copy(), tags=list(p.tags))
    unknown = [p for p in parts if p.value is None]
    if unknown:
        return Outcome(None, unknown=[w for p in unknown for w in p.unknown])
    return Outcome(False, reasons=[r for p in parts for r in p.reasons])


_OPS = ("equals", "in", "contains", "gte", "lte", "gt", "lt", "specifier", "truthy")


def _leaf(cond: Row, ctx: RulesContext, row: Optional[Row]) -> Outcome:
    doc = cond.doc
    path = str(doc.get("fact"))
    value = lookup(ctx, path, row)
    op = next((o for o in _OPS if o in doc), None)
    if op is None:
        raise KeyError(f"condition on {path} has no operator")
    operand = resolve(doc.get(op), ctx, row)
    if value is None or (op == "specifier" and version(value) is None):
        text = cond.string("unknown")
        if text is None:
            text = f"could not check {path} (not in the scan)"
        return Outcome(None, unknown=[fmt(text, ctx, row, values={"value": value, "operand": operand})])
    ok: bool
    if op == "equals":
        ok = value == operand
    elif op == "in":
        ok = isinstance(operand, (list, tuple, str)) and value in operand
    elif op == "contains":
        ok = isinstance(value, (list, tuple, str)) and operand in value
    elif op == "truthy":
        ok = bool(value) == bool(operand)
    elif op == "specifier":
        if operand is None:
            return Outcome(True)
        ok = spec_contains(str(operand), version(value))  # type: ignore[arg-type]
    else:
        a, b = _num(value), _num(operand)
        if a is None or b is None:
            return Outcome(None, unknown=[f"could not compare {path}={value!r} with {operand!r}"])
        ok = {"gte": a >= b, "lte": a <= b, "gt": a > b, "lt": a < b}[op]
    if ok:
        return Outcome(True)
    text = cond.string("because") or f"{path} is {{value}}, needs {op} {{operand}}"
    return Outcome(False, reasons=[fmt(text, ctx, row, values={"value": value, "operand": operand})])


def _num(v: object) -> Optional[float]:
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

TestFn = Callable[[Row, RulesContext, Knowledge, Optional[Row]], Outcome]
TESTS: Dict[str, TestFn] = {}


def test(name: str) -> Callable[[TestFn], TestFn]:
    """Register a named test; a second test under a name already taken is refused (ValueError naming
    both), so one cannot silently replace another."""
    def deco(fn: TestFn) -> TestFn:
        taken = TESTS.get(name)
        if taken is not None and _where(taken) != _where(fn):
            raise ValueError(f"the named test {name!r} is registered twice: {_where(taken)} and {_where(fn)}")
        TESTS[name] = fn
        return fn

    return deco


def _where(fn: Callable[..., object]) -> str:
    """module.qualname of a registered function (the same definition imported again is not a second one)."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
