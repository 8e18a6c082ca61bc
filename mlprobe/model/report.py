"""The report envelope as typed, frozen contracts: what `mlprobe report` writes around the scan
(ScanReport), the plan (or a note why there is none), the verify results and doctor's findings (when
there are). JSON in and out through model/contract.py;
report/report.schema.json is the published schema, checked against these types by a test."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Dict, Mapping, Optional, Tuple

from .docversion import schema_id, upgraded
from .contract import contract, from_json, OPTIONAL_KEY, Record, to_json
from .doctor import DoctorResult
from .facts import ScanReport
from .plan import Plan
from .verify import VerifyResult

REPORT_SCHEMA = schema_id("report")
REPORT_KIND = "mlprobe-report"


@contract
class RedactionCount(Record):
    """How many distinct values of one kind were replaced, and how often."""

    values: int
    occurrences: int


@contract
class Redactions(Record):
    """What was replaced, by kind (secret, host, user, path, ...), or a warning that nothing was."""

    enabled: bool
    note: str
    kinds: Optional[Mapping[str, RedactionCount]] = field(default=None, metadata=OPTIONAL_KEY)
    total: Optional[int] = field(default=None, metadata=OPTIONAL_KEY)


@contract
class BundleFile(Record):
    """One raw capture: its text (redacted) or, for binary data, base64."""

    text: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    base64: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)


@contract
class CaptureBundle(Record):
    """The raw captures (`--include-raw`), so that `mlprobe scan --replay REPORT.json` works."""

    redacted: bool
    files: Mapping[str, BundleFile]


@contract
class Unavailable(Record):
    """A section of the report that could not be made, and why (`{"available": false, "note": ...}`)."""

    note: str
    available: bool = False

    def to_json(self) -> Dict[str, Any]:
        return {"available": False, "note": self.note}


def _unavailable(doc: Any) -> Optional[Unavailable]:
    if isinstance(doc, Mapping) and doc.get("available") is False:
        return Unavailable(note=str(doc.get("note") or ""))
    return None


@contract
class PlanSection(Record):
    """The report's plan, or why there is none."""

    plan: Optional[Plan] = None
    missing: Optional[Unavailable] = None
    OWN_JSON = True  # either shape is read by from_json below (model/contract.py)

    def to_json(self) -> Dict[str, Any]:
        return self.plan.to_json() if self.plan is not None else (self.missing or Unavailable("no plan")).to_json()

    @classmethod
    def from_json(cls, doc: Any) -> "PlanSection":
        missing = _unavailable(doc)
        return cls(missing=missing) if missing else cls(plan=Plan.from_json(doc))


@contract
class VerifySection(Record):
    """The report's verify results, or why there are none."""

    result: Optional[VerifyResult] = None
    missing: Optional[Unavailable] = None
    OWN_JSON = True

    def to_json(self) -> Dict[str, Any]:
        if self.result is not None:
            return self.result.to_json()
        return (self.missing or Unavailable("no verify results")).to_json()

    @classmethod
    def from_json(cls, doc: Any) -> "VerifySection":
        missing = _unavailable(doc)
        return cls(missing=missing) if missing else cls(result=VerifyResult.from_json(doc))


@contract
class DoctorSection(Record):
    """`mlprobe doctor`'s findings for the report, or why there are none."""

    result: Optional[DoctorResult] = None
    missing: Optional[Unavailable] = None
    OWN_JSON = True

    def to_json(self) -> Dict[str, Any]:
        if self.result is not None:
            return self.result.to_json()
        return (self.missing or Unavailable("no doctor findings")).to_json()

    @classmethod
    def from_json(cls, doc: Any) -> "DoctorSection":
        missing = _unavailable(doc)
        return cls(missing=missing) if missing else cls(result=DoctorResult.from_json(doc))


@contract
class ReportEnvelope(Record):
    """mlprobe report: the redacted scan, its plan (or a note why there is none) and verify results."""

    schema: str
    kind: str
    mlprobe_version: str
    generated_at: str
    redactions: Redactions
    scan: ScanReport
    plan: PlanSection
    verify: Optional[VerifySection] = field(default=None, metadata=OPTIONAL_KEY)
    # `mlprobe doctor`'s findings (model/doctor.py DoctorResult), or {available: false, note}
    doctor: Optional[DoctorSection] = field(default=None, metadata=OPTIONAL_KEY)
    capture_bundle: Optional[CaptureBundle] = field(default=None, metadata=OPTIONAL_KEY)
    notes: Tuple[str, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = to_json(self)
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "ReportEnvelope":
        """A report envelope (an old one, `report_version: 1`, too); a field of the wrong shape is a
        ContractError naming it."""
        return from_json(cls, upgraded(doc, "report"))


__all__ = ["BundleFile", "CaptureBundle", "DoctorSection", "PlanSection", "REPORT_KIND", "REPORT_SCHEMA",
           "RedactionCount", "Redactions", "ReportEnvelope", "Unavailable", "VerifySection"]
