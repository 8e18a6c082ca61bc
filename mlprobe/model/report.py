"""The report envelope as typed, frozen contracts: what `mlprobe report` writes around the scan, the
plan and (when asked) the verify results. JSON in and out through model/contract.py;
report/report.schema.json is the published schema, checked against these types by a test."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Dict, Mapping, Optional, Tuple

from .contract import contract, from_json, OPTIONAL_KEY, Record, to_json

REPORT_VERSION = 1
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
class ReportEnvelope(Record):
    """mlprobe report: the redacted scan, its plan (or a note why there is none) and verify results."""

    report_version: int
    kind: str
    mlprobe_version: str
    generated_at: str
    redactions: Redactions
    scan: Mapping[str, Any]
    plan: Mapping[str, Any]
    verify: Optional[Mapping[str, Any]] = field(default=None, metadata=OPTIONAL_KEY)
    # `mlprobe doctor`'s findings (model/doctor.py DoctorResult), or {available: false, note}
    doctor: Optional[Mapping[str, Any]] = field(default=None, metadata=OPTIONAL_KEY)
    capture_bundle: Optional[CaptureBundle] = field(default=None, metadata=OPTIONAL_KEY)
    notes: Tuple[str, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = to_json(self)
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "ReportEnvelope":
        """A report envelope; a field of the wrong shape is a ContractError naming it."""
        return from_json(cls, doc)


__all__ = ["BundleFile", "CaptureBundle", "REPORT_KIND", "REPORT_VERSION", "RedactionCount", "Redactions",
           "ReportEnvelope"]
