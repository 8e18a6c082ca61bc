"""Which frameworks a target interpreter can import, asked of the verify payload's discover mode in a
tiny child (find_spec only: nothing is imported there), read once into typed values; and the small
readers of the payload's JSON records the runner shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Mapping, Optional

from ..errors import StageError
from ..model.jsontypes import JsonObject, JsonValue
from ..model.vocabulary import vocabulary
from .child import Event, child_env, run_child

if TYPE_CHECKING:
    from .overlap import TimingGate

FRAMEWORKS = vocabulary().payload_frameworks()  # what the payload trains itself


def _s(value: JsonValue) -> Optional[str]:
    return value if isinstance(value, str) else None


def _obj(value: JsonValue) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _objects(value: JsonValue) -> List[JsonObject]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


@dataclass(frozen=True)
class Found:
    """One framework as discover found it in the target: importable, its version, PlaidML's shim."""

    importable: bool = False
    version: Optional[str] = None
    shim: bool = False


@dataclass(frozen=True)
class Discovery:
    """The target interpreter, as the payload's discover mode describes it (read once from its event)."""

    python: Optional[str] = None
    prefix: Optional[str] = None
    platform: Optional[str] = None
    machine: Optional[str] = None
    cpu_count: Optional[int] = None
    frameworks: Mapping[str, Found] = field(default_factory=dict)

    @classmethod
    def of(cls, ev: Event) -> "Discovery":
        """The answer of another interpreter: only the shapes the payload sends are kept."""
        found = {str(k): Found(importable=bool(v.get("importable")), version=_s(v.get("version")),
                               shim=bool(v.get("shim")))
                 for k, v in _obj(ev.get("frameworks")).items() if isinstance(v, dict)}
        cpus = ev.get("cpu_count")
        return cls(python=_s(ev.get("python")), prefix=_s(ev.get("prefix")), platform=_s(ev.get("platform")),
                   machine=_s(ev.get("machine")),
                   cpu_count=cpus if isinstance(cpus, int) and not isinstance(cpus, bool) else None,
                   frameworks=found)

    def importable(self, framework: str) -> bool:
        return self.frameworks.get(framework, Found()).importable


def discover(python: str, timeout: float = 60.0, env: Optional[Mapping[str, str]] = None,
             gate: Optional["TimingGate"] = None) -> Discovery:
    """Which frameworks the target can import (importlib.util.find_spec in a tiny child)."""
    import json

    ask = json.dumps({"frameworks": list(FRAMEWORKS)})  # the registry's list, not one of the payload's
    res = run_child(python, ["discover", ask], env=child_env(env), timeout=timeout, stall=timeout, gate=gate)
    for ev in res.events:
        if ev.get("event") == "discover":
            return Discovery.of(ev)
    raise StageError(
        f"could not run the verify probe in {python}",
        why=f"the interpreter {res.how()}" + (f": {res.last_error_line()}" if res.last_error_line() else ""),
        next_step="check that it is a working Python 3.7 or newer (`PYTHON -c 'import sys; print(sys.version)'`)",
        ref="E602", kind="unavailable")


