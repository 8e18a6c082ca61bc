"""`mlprobe doctor` as typed, frozen contracts: each link of the chain from hardware to a framework
that sees it is checked by a rule (mlprobe/knowledge/doctor.json); a rule that finds something gives a
`Finding` with its severity, the capture lines it read (`Evidence`), the fix, and its source.
`DoctorResult` is what `mlprobe doctor --json` prints and what a report carries; `doctor_schema()` is
the published schema (`mlprobe schema doctor`)."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Dict, Optional, Tuple

from .docversion import schema_id, upgraded, with_id
from .contract import contract, from_json, json_schema, OPTIONAL_KEY, Record, to_json

DOCTOR_SCHEMA = schema_id("doctor")
DOCTOR_KIND = "mlprobe-doctor"
SEVERITIES = ("blocking", "warning", "info")
LINKS = ("build", "nvidia", "amd", "visibility", "libraries", "container", "wsl", "macos", "opencl",
         "framework")


@contract
class Evidence(Record):
    """One line a rule read: the capture it came from and the line as the capture has it."""

    capture: str
    line: str
    note: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)


@contract
class Finding(Record):
    """What one rule found: severity, the problem in words, the evidence, the fix, the source."""

    rule: str
    link: str
    severity: str  # one of SEVERITIES
    title: str
    detail: Optional[str] = None
    evidence: Tuple[Evidence, ...] = ()
    fix: Tuple[str, ...] = ()
    source: str = ""


@contract
class RuleOutcome(Record):
    """Every rule that was asked, and what came of it: found, clear, or not decidable from the
    captures (and which capture was missing)."""

    rule: str
    outcome: str  # "found", "clear", "unknown"
    why: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)


@contract
class FrameworkSeen(Record):
    """What one framework's own enumeration listed (or why it could not be asked)."""

    name: str
    version: Optional[str] = None
    devices: Tuple[str, ...] = ()  # "cuda:0 NVIDIA H200", ...
    unavailable: Tuple[str, ...] = ()  # the framework's reasons, in its words
    error: Optional[str] = None


@contract
class SettingSeen(Record):
    """One setting mlprobe wrote for the venv, as each way of starting its Python gets it: `plain`
    (started without activate: an IDE, Jupyter, cron, `uv run`) and `activated`, each with where the
    value came from ("user": set before Python started; "start-up hook"; "activate script"; "unset")."""

    name: str
    wanted: Optional[str]
    places: Tuple[str, ...]
    plain: Optional[str]
    plain_from: str
    activated: Optional[str]
    activated_from: str


@contract
class LoadedLibrary(Record):
    """A shared library a framework's process had loaded: its path, the family it belongs to (cuDNN,
    cuBLAS …, knowledge/libraries.json), who put it there (a wheel by its RECORD, the system, a conda
    prefix, an LD_LIBRARY_PATH entry) and the version its name says."""

    path: str
    origin: str
    family: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    owner: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    version: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)


@contract
class LibraryLoad(Record):
    """What one process that imported these frameworks, in this order, had loaded."""

    frameworks: Tuple[str, ...]
    libraries: Tuple[LoadedLibrary, ...]
    error: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)


@contract
class DoctorResult(Record):
    """`mlprobe doctor --json`: the verdict, the findings (blocking first), every rule's outcome, what
    the frameworks saw, and where the facts came from."""

    schema: str
    kind: str
    verdict: str  # "blocking" or "ok"
    summary: str
    python: Optional[str]
    source: Dict[str, Any]
    environment: Tuple[str, ...]  # "a Docker container (/.dockerenv)", "WSL2", ...
    findings: Tuple[Finding, ...]
    rules: Tuple[RuleOutcome, ...]
    frameworks: Tuple[FrameworkSeen, ...] = ()
    enumeration: Optional[str] = None  # how the frameworks were asked (live, replayed, not at all)
    settings: Tuple[SettingSeen, ...] = ()  # the venv's settings at each way of starting it
    libraries: Tuple[LibraryLoad, ...] = ()  # the shared libraries the frameworks' processes loaded

    @property
    def blocking(self) -> Tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "blocking")

    def to_json(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = to_json(self)
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "DoctorResult":
        return from_json(cls, upgraded(doc, "doctor"))


def doctor_schema() -> Dict[str, Any]:
    """The JSON Schema of `mlprobe doctor --json`, derived from the types, with the closed vocabularies
    (severity, link, outcome, verdict) as enums."""
    doc = json_schema(DoctorResult, "mlprobe doctor")
    defs = doc.get("$defs", {})
    defs["Finding"]["properties"]["severity"]["enum"] = list(SEVERITIES)
    defs["Finding"]["properties"]["link"]["enum"] = list(LINKS)
    defs["RuleOutcome"]["properties"]["outcome"]["enum"] = ["found", "clear", "unknown"]
    doc["properties"]["verdict"]["enum"] = ["blocking", "ok"]
    doc["properties"]["kind"]["const"] = DOCTOR_KIND
    return with_id(doc, "doctor")


__all__ = ["DOCTOR_KIND", "DOCTOR_SCHEMA", "DoctorResult", "Evidence", "Finding", "FrameworkSeen", "LINKS",
           "RuleOutcome", "SEVERITIES", "doctor_schema"]
