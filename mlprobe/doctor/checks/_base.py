"""What every doctor check shares: the registry (`check`), the result types (Hit, Unknown) and the
small readers of the context several families use (frameworks' versions and builds, device nodes,
the container engines' GPU flags)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Union

from ...model.doctor import Evidence
from ...model.knowledge import Row, rows
from ..context import DoctorContext
from ..parse import DevNode


@dataclass
class Hit:
    params: Mapping[str, object]  # the placeholders of the rule's title and fix
    evidence: List[Evidence] = field(default_factory=list)
    severity: Optional[str] = None  # overrides the rule's own
    detail: Optional[str] = None


@dataclass
class Unknown:
    why: str


Result = Union[List[Hit], Unknown]
Check = Callable[[DoctorContext, Row], Result]  # the context and the rule's row of knowledge/doctor.json
CHECKS: Dict[str, Check] = {}

PLAN_HINT = "mlprobe plan  # the builds that fit this machine, with their install commands"


def check(name: str) -> Callable[[Check], Check]:
    """Register a check under the name a rule's `test` gives; a second check under a name already taken
    is refused (ValueError naming both), so one cannot silently replace another."""
    def deco(fn: Check) -> Check:
        taken = CHECKS.get(name)
        if taken is not None and _where(taken) != _where(fn):
            raise ValueError(f"the doctor check {name!r} is registered twice: {_where(taken)} and {_where(fn)}")
        CHECKS[name] = fn
        return fn
    return deco


def _where(fn: Callable[..., object]) -> str:
    """module.qualname of a registered check (the same definition imported again is not a second one)."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _ev(*items: Optional[Evidence]) -> List[Evidence]:
    return [e for e in items if e is not None]


def _flavour(dc: DoctorContext, name: str = "torch") -> Optional[str]:
    fw = dc.frameworks.get(name)
    return fw.flavour if fw and fw.flavour else None


def _version(dc: DoctorContext, name: str) -> str:
    fw = dc.frameworks.get(name)
    return (fw.version if fw is not None else None) or "?"


def _linux_native(dc: DoctorContext) -> bool:
    return dc.system == "Linux" and dc.wsl[0] is None


def _seen_reason(dc: DoctorContext, name: str) -> Optional[Evidence]:
    seen = dc.seen(name)
    if seen is None:
        return None
    for u in seen.unavailable:
        if u.get("reason"):
            return Evidence(capture=dc.enumeration.source if dc.enumeration else "framework-devices.json",
                            line=str(u["reason"]))
    return None


def _node_problem(node: Optional[DevNode], path: str, dc: DoctorContext) -> Optional[str]:
    if node is None:
        return f"{path} does not exist"
    who = dc.identity
    if who is None:
        return None
    ok = node.allows(who)
    if ok is False:
        groups = ", ".join(who.group_names() or who.group_ids()) or "none"
        return (f"{path} is {node.kind}{node.mode} {node.owner}:{node.group}, and this user "
                f"({who.user or who.uid}, groups {groups}) may not open it")
    return None


def _run_lines(dc: DoctorContext, vendor: str) -> List[str]:
    lines = [r for r in rows("doctor", "container_gpu_lines") if r.get("vendor") == vendor]
    engine = dc.engine()
    first = [r["line"] for r in lines if r.get("engine") == engine]
    return first + [r["line"] for r in lines if r.get("engine") != engine]
