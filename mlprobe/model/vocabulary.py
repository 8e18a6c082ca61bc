"""The one registry of names (mlprobe/knowledge/registry.json): frameworks, backends, GPU vendors and
the facts a recipe condition may name. The CLI choices, the recipe and verify schemas, the planner,
the installer and the verifier read their lists here; a new framework, backend or vendor is a row
of data. Pure: reads one packaged JSON file, once."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Dict, Optional, Tuple

from .contract import contract, Record
from .knowledge import load


class RegistryError(ValueError):
    """The registry file is missing or has a row without the fields every reader needs."""


@contract
class Framework(Record):
    """A framework in the registry: its id, title, planner and verify names, import name, aliases."""

    id: str
    title: str
    plan: bool  # offered by `plan --framework` / `install --framework`
    verify: Optional[str]  # what `verify --framework` runs for it; None: no verify payload
    payload: bool  # the verify payload trains this framework itself
    import_name: str  # the module the installer's import check imports
    aliases: Tuple[str, ...] = ()
    fleet: Tuple[str, ...] = ()  # the distributions whose build `fleet show` names in a group's software


@contract
class Backend(Record):
    """A backend in the registry (cuda, rocm, cpu, ...): whether its devices are GPUs, and the one GPU
    vendor it runs on (None: any vendor's, or no GPU)."""

    id: str
    title: str
    gpu: bool = False
    vendor: Optional[str] = None


@contract
class Vendor(Record):
    """A GPU vendor in the registry: its id, PCI vendor ids and the pattern its names match."""

    id: str
    pci: Tuple[str, ...]
    text: Optional["re.Pattern[str]"]


@contract
class Vocabulary(Record):
    """Every name a recipe, a command or a document may use: frameworks, backends, vendors, facts."""

    frameworks: Tuple[Framework, ...]
    backends: Tuple[Backend, ...]
    vendors: Tuple[Vendor, ...]
    facts: Dict[str, str]  # fact path -> type ("str?", "int", "list", ...)

    def framework(self, name: Optional[str]) -> Optional[Framework]:
        """By id or alias, case-insensitive."""
        key = (name or "").strip().lower()
        return next((f for f in self.frameworks if key == f.id or key in f.aliases), None)

    def framework_ids(self) -> Tuple[str, ...]:
        return tuple(f.id for f in self.frameworks)

    def plan_frameworks(self) -> Tuple[str, ...]:
        return tuple(f.id for f in self.frameworks if f.plan)

    def verify_choices(self) -> Tuple[str, ...]:
        """`verify --framework` choices (besides "any"): frameworks that are their own verify target."""
        return tuple(f.id for f in self.frameworks if f.verify == f.id)

    def payload_frameworks(self) -> Tuple[str, ...]:
        return tuple(f.id for f in self.frameworks if f.payload)

    def fleet_builds(self) -> Tuple[str, ...]:
        """The distributions whose build `fleet show` names in a group's software column."""
        return tuple(d for f in self.frameworks for d in f.fleet)

    def backend_ids(self) -> Tuple[str, ...]:
        return tuple(b.id for b in self.backends)

    def gpu_backends(self) -> Tuple[str, ...]:
        """The backends whose devices are GPUs (also the device kinds verify gives them)."""
        return tuple(b.id for b in self.backends if b.gpu)

    def backend_vendor(self, backend: Optional[str]) -> Optional[str]:
        """The one GPU vendor a backend runs on (cuda: nvidia), None for any other."""
        return next((b.vendor for b in self.backends if b.id == backend), None)

    def is_fact(self, path: str) -> bool:
        return path in self.facts

    def fact_groups(self) -> Tuple[str, ...]:
        return tuple(dict.fromkeys(p.split(".")[0] for p in self.facts))


def _strs(value: object) -> Tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


@lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    doc = load("registry")
    if doc is None:
        raise RegistryError("mlprobe/knowledge/registry.json is missing or not a JSON object")
    try:
        frameworks = tuple(
            Framework(id=str(r["id"]), title=str(r["title"]), plan=bool(r["plan"]),
                      verify=str(r["verify"]) if r.get("verify") else None, payload=bool(r["payload"]),
                      import_name=str(r["import"]), aliases=_strs(r.get("aliases")), fleet=_strs(r.get("fleet")))
            for r in doc["frameworks"]
        )
        backends = tuple(Backend(id=str(r["id"]), title=str(r["title"]), gpu=bool(r.get("gpu")),
                                 vendor=str(r["vendor"]) if r.get("vendor") else None) for r in doc["backends"])
        vendors = tuple(
            Vendor(id=str(r["id"]), pci=_strs(r.get("pci")),
                   text=re.compile(str(r["text"]), re.I) if r.get("text") else None)
            for r in doc["vendors"]
        )
        facts = {str(k): str(v) for k, v in doc["facts"]["types"].items()}
    except (KeyError, TypeError, re.error) as exc:
        raise RegistryError(f"mlprobe/knowledge/registry.json: {type(exc).__name__}: {exc}") from None
    return Vocabulary(frameworks, backends, vendors, facts)


__all__ = ["Backend", "Framework", "RegistryError", "Vendor", "Vocabulary", "vocabulary"]
