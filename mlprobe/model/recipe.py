"""A recipe (mlprobe/recipes/<id>.json) as typed records, made once when the recipes load (after the
structural and vocabulary checks of mlprobe/recipes). Conditions stay condition trees, read through
model/knowledge.Row by the evaluator (plan/conditions.py); strings may hold `{...}` templates that the
planner fills from the facts, the knowledge row and the effects. Plain classes with slots: defining
them costs nothing at import (a dataclass compiles its methods, a tenth of the plan's budget for all
of them), and they are only read after they are made."""

from __future__ import annotations

from typing import Mapping, Optional, Tuple

from .knowledge import Row


class Source:
    __slots__ = ('id', 'reference')

    id: str
    reference: str

    def __init__(self, id: str,
                 reference: str) -> None:
        self.id = id
        self.reference = reference


class Variants:
    """Pick one row of a knowledge table (`torch_wheels.cuda`), in table order."""

    __slots__ = ('table', 'conditions', 'group_by', 'version_key', 'label')

    table: str
    conditions: Row
    group_by: Optional[str]
    version_key: Optional[str]
    label: Optional[str]

    def __init__(self, table: str,
                 conditions: Row,
                 group_by: Optional[str] = None,
                 version_key: Optional[str] = None,
                 label: Optional[str] = None) -> None:
        self.table = table
        self.conditions = conditions
        self.group_by = group_by
        self.version_key = version_key
        self.label = label


class IndexSpec:
    """The wheel index a recipe installs from: an index of knowledge/indexes.json and a suffix."""

    __slots__ = ('id', 'suffix')

    id: str
    suffix: str

    def __init__(self, id: str,
                 suffix: str) -> None:
        self.id = id
        self.suffix = suffix


class ExtraIndex:
    __slots__ = ('id', 'suffix', 'why', 'when')

    id: str
    suffix: str
    why: str
    when: Optional[Row]

    def __init__(self, id: str,
                 suffix: str,
                 why: str,
                 when: Optional[Row] = None) -> None:
        self.id = id
        self.suffix = suffix
        self.why = why
        self.when = when


class FileSpec:
    """A settings file the recipe writes: its path and JSON (templates inside)."""

    __slots__ = ('path', 'json', 'why')

    path: str
    json: object
    why: Optional[str]

    def __init__(self, path: str,
                 json: object,
                 why: Optional[str] = None) -> None:
        self.path = path
        self.json = json
        self.why = why


class ShimSpec:
    __slots__ = ('shim', 'why', 'when')

    shim: str
    why: Optional[str]
    when: Optional[Row]

    def __init__(self, shim: str,
                 why: Optional[str] = None,
                 when: Optional[Row] = None) -> None:
        self.shim = shim
        self.why = why
        self.when = when


class Install:
    __slots__ = ('packages', 'pinned_packages', 'index', 'extra_indexes', 'env', 'files', 'steps')

    packages: Tuple[str, ...]
    pinned_packages: Tuple[str, ...]
    index: Optional[IndexSpec]
    extra_indexes: Tuple[ExtraIndex, ...]
    env: Mapping[str, str]
    files: Tuple[FileSpec, ...]
    steps: Tuple[ShimSpec, ...]

    def __init__(self, packages: Tuple[str, ...] = (),
                 pinned_packages: Tuple[str, ...] = (),
                 index: Optional[IndexSpec] = None,
                 extra_indexes: Tuple[ExtraIndex, ...] = (),
                 env: Optional[Mapping[str, str]] = None,
                 files: Tuple[FileSpec, ...] = (),
                 steps: Tuple[ShimSpec, ...] = ()) -> None:
        self.packages = packages
        self.pinned_packages = pinned_packages
        self.index = index
        self.extra_indexes = extra_indexes
        self.env = env if env is not None else {}
        self.files = files
        self.steps = steps


class WarnIf:
    __slots__ = ('when', 'text')

    when: Row
    text: str

    def __init__(self, when: Row,
                 text: str) -> None:
        self.when = when
        self.text = text


class Recipe:
    """One way to install a framework for one kind of hardware (recipe.schema.json)."""

    __slots__ = ('id', 'title', 'framework', 'backend', 'status', 'speed', 'conditions', 'install', 'verify',
                 'sources', 'speed_integrated', 'aliases', 'provides', 'summary', 'successor', 'relevant_when',
                 'variants', 'warnings', 'warn_if', 'notes')

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
    speed_integrated: Optional[int]
    aliases: Tuple[str, ...]
    provides: Tuple[str, ...]
    summary: Optional[str]
    successor: Optional[str]
    relevant_when: Optional[Row]
    variants: Optional[Variants]
    warnings: Tuple[str, ...]
    warn_if: Tuple[WarnIf, ...]
    notes: Tuple[str, ...]

    def __init__(self, id: str,
                 title: str,
                 framework: str,
                 backend: str,
                 status: str,
                 speed: int,
                 conditions: Row,
                 install: Install,
                 verify: Mapping[str, str],
                 sources: Tuple[Source, ...],
                 speed_integrated: Optional[int] = None,
                 aliases: Tuple[str, ...] = (),
                 provides: Tuple[str, ...] = (),
                 summary: Optional[str] = None,
                 successor: Optional[str] = None,
                 relevant_when: Optional[Row] = None,
                 variants: Optional[Variants] = None,
                 warnings: Tuple[str, ...] = (),
                 warn_if: Tuple[WarnIf, ...] = (),
                 notes: Tuple[str, ...] = ()) -> None:
        self.id = id
        self.title = title
        self.framework = framework
        self.backend = backend
        self.status = status
        self.speed = speed
        self.conditions = conditions
        self.install = install
        self.verify = verify
        self.sources = sources
        self.speed_integrated = speed_integrated
        self.aliases = aliases
        self.provides = provides
        self.summary = summary
        self.successor = successor
        self.relevant_when = relevant_when
        self.variants = variants
        self.warnings = warnings
        self.warn_if = warn_if
        self.notes = notes

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
