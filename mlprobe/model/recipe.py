"""A recipe (mlprobe/recipes/<id>.json) as a typed record, made once when the recipes load (after the
structural and vocabulary checks of mlprobe/recipes). Conditions stay condition trees, read through
model/knowledge.Row by the evaluator (plan/conditions.py); strings may hold `{...}` templates that the
planner fills from the facts, the knowledge row and the effects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple

from .knowledge import Row


@dataclass(frozen=True)
class Source:
    id: str
    reference: str


@dataclass(frozen=True)
class Variants:
    """Pick one row of a knowledge table (`torch_wheels.cuda`), in table order."""

    table: str
    conditions: Row
    group_by: Optional[str] = None
    version_key: Optional[str] = None
    label: Optional[str] = None


@dataclass(frozen=True)
class IndexSpec:
    """The wheel index a recipe installs from: an index of knowledge/indexes.json and a suffix."""

    id: str
    suffix: str


@dataclass(frozen=True)
class ExtraIndex:
    id: str
    suffix: str
    why: str
    when: Optional[Row] = None


@dataclass(frozen=True)
class FileSpec:
    """A settings file the recipe writes: its path and JSON (templates inside)."""

    path: str
    json: object
    why: Optional[str] = None


@dataclass(frozen=True)
class ShimSpec:
    shim: str
    why: Optional[str] = None
    when: Optional[Row] = None


@dataclass(frozen=True)
class Install:
    packages: Tuple[str, ...] = ()
    pinned_packages: Tuple[str, ...] = ()
    index: Optional[IndexSpec] = None
    extra_indexes: Tuple[ExtraIndex, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    files: Tuple[FileSpec, ...] = ()
    steps: Tuple[ShimSpec, ...] = ()


@dataclass(frozen=True)
class WarnIf:
    when: Row
    text: str


@dataclass(frozen=True)
class Recipe:
    """One way to install a framework for one kind of hardware (recipe.schema.json)."""

    id: str
    title: str
    framework: str
    backend: str
    status: str
    speed: int
    conditions: Row
    install: Install
    verify: Mapping[str, str]
    sources: Tuple[Source, ...]
    speed_integrated: Optional[int] = None
    aliases: Tuple[str, ...] = ()
    provides: Tuple[str, ...] = ()
    summary: Optional[str] = None
    successor: Optional[str] = None
    relevant_when: Optional[Row] = None
    variants: Optional[Variants] = None
    warnings: Tuple[str, ...] = ()
    warn_if: Tuple[WarnIf, ...] = ()
    notes: Tuple[str, ...] = ()

    @property
    def frameworks(self) -> Tuple[str, ...]:
        """The frameworks a plan offers it for: its own, then what it also provides."""
        return tuple(dict.fromkeys((self.framework, *self.provides)))

    @classmethod
    def from_doc(cls, doc: Mapping[str, object]) -> "Recipe":
        """A recipe from its checked JSON document (mlprobe/recipes/__init__.check_recipe)."""
        r = Row(doc)
        inst = r.row("install")
        index = inst.row("index")
        spec = r.row("variants")
        return cls(
            id=str(r.get("id")), title=str(r.get("title")), framework=str(r.get("framework")),
            backend=str(r.get("backend")), status=str(r.get("status")), speed=int(r.integer("speed") or 0),
            conditions=r.row("conditions") or Row({"all": []}),
            install=Install(
                packages=inst.texts("packages"), pinned_packages=inst.texts("pinned_packages"),
                index=IndexSpec(str(index.get("id")), str(index.get("suffix"))) if index else None,
                extra_indexes=tuple(ExtraIndex(str(x.get("id")), str(x.get("suffix")), str(x.get("why")),
                                               x.row("when") if "when" in x else None)
                                    for x in inst.rows("extra_indexes")),
                env={str(k): str(v) for k, v in inst.row("env").doc.items()},
                files=tuple(FileSpec(str(f.get("path")), f.get("json"), f.text("why")) for f in inst.rows("files")),
                steps=tuple(ShimSpec(str(s.get("shim")), s.text("why"), s.row("when") if "when" in s else None)
                            for s in inst.rows("steps")),
            ),
            verify={str(k): str(v) for k, v in r.row("verify").doc.items()},
            sources=tuple(Source(str(s.get("id")), str(s.get("reference"))) for s in r.rows("sources")),
            speed_integrated=r.integer("speed_integrated"),
            aliases=r.texts("aliases"), provides=r.texts("provides"),
            summary=r.text("summary"), successor=r.text("successor"),
            relevant_when=r.row("relevant_when") if isinstance(r.get("relevant_when"), Mapping) else None,
            variants=Variants(str(spec.get("table")), spec.row("conditions") or Row({"all": []}),
                              spec.string("group_by"), spec.string("version_key"), spec.string("label"))
            if spec else None,
            warnings=r.texts("warnings"),
            warn_if=tuple(WarnIf(w.row("when"), str(w.get("text"))) for w in r.rows("warn_if")),
            notes=r.texts("notes"),
        )


__all__ = ["ExtraIndex", "FileSpec", "IndexSpec", "Install", "Recipe", "ShimSpec", "Source", "Variants", "WarnIf"]
