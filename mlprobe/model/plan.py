"""The plan as typed, frozen contracts: what the planner writes (`mlprobe plan --json`) and what the
installer reads. `Plan` holds the ranked `Recommendation`s (with their index reference, config files,
shim steps and verify target), the `Rejection`s with their reasons, the `RetiredPath`s and the
`InstalledFinding`s. JSON in and out through `model/contract.py` (`Plan.to_json` / `Plan.from_json`;
the key order is the one `plan --json` prints); `Recommendation.from_json` also reads a hand-written
recommendation (`install --recipe-file`). `mlprobe schema plan` prints the schema derived from these
types."""

from __future__ import annotations

import json
from dataclasses import field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .docversion import schema_id, upgraded, with_id
from .contract import contract, ContractError, from_json, json_schema, OPTIONAL_KEY, Record, to_json

PLAN_SCHEMA = schema_id("plan")


@contract
class ConfigFile(Record):
    """A file a recipe writes (e.g. plaidml's config), its content and why."""

    path: str
    json: Any
    content: str
    why: Optional[str] = None


@contract
class ShimStep(Record):
    """A compatibility shim a recipe installs, and why."""

    shim: str
    why: Optional[str] = None


@contract
class VerifyTarget(Record):
    """The framework and device `mlprobe verify` checks after a recipe is installed."""

    framework: Optional[str] = None
    device: Optional[str] = None


@contract
class IndexRef(Record):
    """The build index a recipe installs from: its suffix (`cu130`) and, when the knowledge (or a
    mirror) gives one, the full URL. A suffix without a URL is a build index mlprobe cannot locate."""

    suffix: str
    url: Optional[str]


@contract
class Recommendation(Record):
    """A recipe that fits this machine: what to install, from where, how, and how to verify it."""

    recipe: str
    title: str
    framework: Optional[str] = None
    backend: Optional[str] = None
    status: Optional[str] = None
    score: Optional[int] = None
    index: Optional[str] = None
    index_url: Optional[str] = None
    # indexes next to the main one (pip's --extra-index-url) for a set whose packages live on two
    extra_index_urls: Tuple[str, ...] = ()
    version: Optional[str] = None
    packages: Tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    files: Tuple[ConfigFile, ...] = ()
    steps: Tuple[ShimStep, ...] = ()
    commands: Tuple[str, ...] = ()
    # what the user does before the install, in words: a vendor toolkit the wheels do not bring (CANN)
    prerequisites: Tuple[str, ...] = ()
    verify: VerifyTarget = VerifyTarget()
    warnings: Tuple[str, ...] = ()
    unknown: Tuple[str, ...] = ()
    device: Optional[str] = None
    device_name: Optional[str] = None
    notes: Tuple[str, ...] = ()
    sources: Tuple[str, ...] = ()
    # modules the installer's import check imports; the planner leaves it empty (the registry names
    # the framework's module), a hand-written --recipe-file may name its own
    imports: Tuple[str, ...] = ()

    @property
    def index_ref(self) -> Optional[IndexRef]:
        return IndexRef(self.index, self.index_url) if self.index else None

    def to_json(self) -> Dict[str, Any]:
        return {
            "recipe": self.recipe, "title": self.title, "framework": self.framework, "backend": self.backend,
            "status": self.status, "score": self.score, "index": self.index, "index_url": self.index_url,
            **({"extra_index_urls": list(self.extra_index_urls)} if self.extra_index_urls else {}),
            "version": self.version, "packages": list(self.packages), "env": dict(self.env),
            "files": [{"path": f.path, "json": f.json, "content": f.content, "why": f.why} for f in self.files],
            "steps": [{"shim": s.shim, "why": s.why} for s in self.steps],
            "commands": list(self.commands),
            **({"prerequisites": list(self.prerequisites)} if self.prerequisites else {}),
            "verify": {"framework": self.verify.framework, "device": self.verify.device},
            "warnings": list(self.warnings), "unknown": list(self.unknown), "device": self.device,
            "device_name": self.device_name, "notes": list(self.notes), "sources": list(self.sources),
            **({"imports": list(self.imports)} if self.imports else {}),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Recommendation":
        """A recommendation from `plan --json` (or a hand-written one with at least `recipe` and
        `packages`). Fields of the wrong type are a ContractError."""
        if not isinstance(doc, Mapping):
            raise ContractError("a recommendation is a JSON object")

        def opt_str(key: str) -> Optional[str]:
            v = doc.get(key)
            if v is None or v == "":
                return None
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise ContractError(f"{key!r} must be a string")
            return str(v)

        def strs(key: str) -> Tuple[str, ...]:
            v = doc.get(key)
            if v is None:
                return ()
            if isinstance(v, str):
                v = [v]
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ContractError(f"{key!r} must be a list of strings")
            return tuple(x.strip() for x in v if x.strip()) if key == "packages" else tuple(v)

        def objs(key: str) -> List[Mapping[str, Any]]:
            v = doc.get(key) or []
            if not isinstance(v, list) or not all(isinstance(x, Mapping) for x in v):
                raise ContractError(f"{key!r} must be a list of objects")
            return list(v)

        env = doc.get("env") or {}
        if not isinstance(env, Mapping):
            raise ContractError("'env' must be an object")
        verify = doc.get("verify") or {}
        if not isinstance(verify, Mapping):
            raise ContractError("'verify' must be an object")
        files = []
        for f in objs("files"):
            if not f.get("path"):
                continue
            content = f.get("content")
            if content is None and "json" in f:
                content = json.dumps(f["json"], indent=2) + "\n"
            files.append(ConfigFile(str(f["path"]), f.get("json"), str(content or ""),
                                    str(f["why"]) if f.get("why") else None))
        score = doc.get("score")
        recipe = opt_str("recipe") or "recipe"
        return cls(
            recipe=recipe, title=opt_str("title") or recipe, framework=opt_str("framework"),
            backend=opt_str("backend"), status=opt_str("status"),
            score=score if isinstance(score, int) and not isinstance(score, bool) else None,
            index=opt_str("index"), index_url=opt_str("index_url"), extra_index_urls=strs("extra_index_urls"),
            version=opt_str("version"),
            packages=strs("packages"), env={str(k): str(v) for k, v in env.items()}, files=tuple(files),
            steps=tuple(ShimStep(str(s["shim"]), str(s["why"]) if s.get("why") else None)
                        for s in objs("steps") if s.get("shim")),
            commands=strs("commands"), prerequisites=strs("prerequisites"),
            verify=VerifyTarget(str(verify["framework"]) if verify.get("framework") else None,
                                str(verify["device"]) if verify.get("device") else None),
            warnings=strs("warnings"), unknown=strs("unknown"), device=opt_str("device"),
            device_name=opt_str("device_name"), notes=strs("notes"), sources=strs("sources"),
            imports=strs("imports"),
        )




@contract
class Rejection(Record):
    """A recipe that does not fit, and why, in words."""

    recipe: str
    title: str
    framework: str
    backend: str
    status: str
    reasons: Tuple[str, ...]


@contract
class RetiredPath(Record):
    """A path people still read about (TensorFlow on OpenCL, Neon, NCSDK), and what replaced it."""

    recipe: str
    title: str
    framework: str
    backend: str
    status: str
    relevant: bool
    summary: Optional[str]
    successor: Optional[str]
    sources: Tuple[str, ...]


@contract
class InstalledFinding(Record):
    """Whether an installed framework build can use this machine (`status`: ok, problem, warning or
    info), and the commands that fix it."""

    package: str
    version: Optional[str]
    build: Optional[str]
    status: str
    message: str
    reasons: Tuple[str, ...] = ()
    fix: Tuple[str, ...] = ()


@contract
class PlanTarget(Record):
    """The interpreter and system the plan is for."""

    python: Optional[str]
    python_source: Optional[str]
    os: Optional[str]
    wsl: Optional[bool]
    arch: Optional[str]


@contract
class GpuUse(Record):
    """How many GPUs a recommended recipe's framework will use, and how (plan/multigpu.py)."""

    recipe: str
    framework: str
    backend: str
    gpus: int  # GPUs of that vendor on the machine
    visible: Tuple[int, ...]  # which of them the framework will see, in the order it numbers them
    devices: Tuple[str, ...]  # what the framework calls them: cuda:0, /GPU:0, ...
    how: str  # one sentence
    variable: Optional[str] = None
    value: Optional[str] = None
    notes: Tuple[str, ...] = ()

    def to_dict(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = to_json(self)
        return doc


@contract
class Plan(Record):
    """mlprobe plan: the recipes that fit (ranked), those that do not (and why), retired paths and
    findings on what is installed."""

    schema: str
    framework: str
    target: PlanTarget
    top: Mapping[str, Optional[str]]
    recommended: Tuple[Recommendation, ...]
    rejected: Tuple[Rejection, ...]
    retired: Tuple[RetiredPath, ...]
    installed: Tuple[InstalledFinding, ...]
    warnings: Tuple[str, ...]
    # what `mlprobe plan` adds: the GPUs each framework will use (the host's environment decides)
    # and where the scan came from; absent from a plan made without a host
    gpu_use: Optional[Tuple[GpuUse, ...]] = field(default=None, metadata=OPTIONAL_KEY)
    source: Optional[Mapping[str, Any]] = field(default=None, metadata=OPTIONAL_KEY)
    # why the first recommendation is first (a tie broken by what is installed, or torch by default);
    # None when nothing fits
    ranking: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = to_json(self)
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "Plan":
        """A plan from `plan --json` (an old one, `plan_version: 1`, too); a field of the wrong shape
        is a ContractError naming it."""
        return from_json(cls, upgraded(doc, "plan"))


def plan_schema() -> Dict[str, Any]:
    """The JSON Schema of `mlprobe plan --json`, derived from the types above."""
    return with_id(json_schema(Plan, "mlprobe plan"), "plan")


def plan_of_report(doc: Any) -> Optional[Plan]:
    """A report's plan section read as a document nobody checked (model/contract.py's lenient
    reading); None when the report has none (`{"available": false, ...}`) or it cannot be read."""
    if not isinstance(doc, dict) or doc.get("available") is False:
        return None
    try:
        return from_json(Plan, upgraded(doc, "plan"), lenient=True)
    except ContractError:
        return None


__all__ = ["ConfigFile", "ContractError", "GpuUse", "IndexRef", "InstalledFinding", "PLAN_SCHEMA", "Plan", "PlanTarget",
           "Recommendation", "Rejection", "RetiredPath", "ShimStep", "VerifyTarget", "plan_of_report", "plan_schema"]
