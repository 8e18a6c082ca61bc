"""The report envelope: one versioned document with the scan, the plan, verify results (when asked)
and the capture bundle (when asked), redacted as a whole by one Redactor. The stages themselves are
run by mlprobe.pipeline.build_report; nothing here scans, plans or verifies.

    {"report_version": 1, "kind": "mlprobe-report", "mlprobe_version": ..., "generated_at": ...,
     "redactions": {...}, "scan": {...}, "plan": {...}, "verify": {...}?, "doctor": {...}?,
     "capture_bundle": {"files": {name: {"text": ...} | {"base64": ...}}}?, "notes": [...]}

`mlprobe scan --replay report.json` reads `capture_bundle` (mlprobe/scan/host.py), so a report made with
--include-raw replays to the same facts elsewhere.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional

from .. import __version__
from ..model.contract import from_json
from ..model.report import REPORT_KIND, REPORT_VERSION, BundleFile, CaptureBundle, Redactions, ReportEnvelope
from ..scan.capture import Host, SPECS
from .patterns import mode_for, protected_values, text_of
from .redact import Redactor


@dataclass(frozen=True)
class ReportOptions:
    verify: bool = False
    include_raw: bool = False
    redact: bool = True
    # verify the frameworks of this interpreter (e.g. the venv `mlprobe install` made) instead of
    # mlprobe's own; implies verify
    python: Optional[str] = None


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def plain(value: Any) -> Any:
    """Plan and verify results as JSON-ready data, whatever their Python type."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return plain(to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def collect_bundle(host: Host) -> Dict[str, bytes]:
    """Every capture this host has, by name. Live: each capture in SPECS is taken (those the scan
    already took come from the host's cache); replay: the bundle's files that are captures."""
    names_fn: Optional[Callable[[], List[str]]] = getattr(host, "names", None)
    if host.kind == "replay" and names_fn is not None:
        names = [n for n in names_fn() if n in SPECS]
    else:
        names = [n for n, s in SPECS.items() if s.internal != "never"]
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="report-capture") as pool:
        caps = list(pool.map(host.get, names))
    return {c.name: c.data for c in caps if c.ok and c.data is not None}


def bundle_entry(data: bytes, redactor: Redactor, name: str) -> Dict[str, str]:
    if redactor.enabled:
        return {"text": redactor.redact_capture(name, data)}
    text, exact = text_of(data, name)
    if exact:
        return {"text": text}
    return {"base64": base64.b64encode(data).decode("ascii")}


def assemble(
    host: Host,
    scan_report: Dict[str, Any],
    plan: Dict[str, Any],
    verify: Optional[Dict[str, Any]],
    options: ReportOptions = ReportOptions(),
    now: Optional[str] = None,
    env: Optional[Dict[str, str]] = None,
    doctor: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """The envelope around a scan, its plan and (when asked) verify results, redacted as a whole.
    Composing the stages is mlprobe.pipeline.build_report's job; this only wraps and redacts."""
    # A live report without --include-raw takes no extra captures (dxdiag alone can take 20 s): this
    # machine's names come from the host itself (Redactor.seed_live), the rest is found by shape.
    files = collect_bundle(host) if (options.include_raw or host.kind != "live") else {}

    redactor = Redactor(protected_values(scan_report), enabled=options.redact)
    if options.redact:
        if host.kind == "live":
            redactor.seed_live(env)
        for name, data in files.items():
            redactor.learn(text_of(data)[0], mode_for(name))
        # secrets seen in the scan, plan or verify documents are replaced in the captures too
        for section in (scan_report, plan, verify, doctor):
            if isinstance(section, dict):
                redactor.learn(json.dumps(section, ensure_ascii=False), "json")

    notes: List[str] = []
    for section in (plan, verify, doctor):
        if isinstance(section, dict) and section.get("available") is False and section.get("note"):
            notes.append(str(section["note"]))
    # redacted in this order: a value's placeholder number is the order in which it is first met
    scan_doc = redactor.redact_obj(scan_report)
    plan_doc = redactor.redact_obj(plan)
    verify_doc = redactor.redact_obj(verify) if verify is not None else None
    doctor_doc = redactor.redact_obj(doctor) if doctor is not None else None
    bundle = None
    if options.include_raw:
        bundle = CaptureBundle(redacted=redactor.enabled, files={
            name: from_json(BundleFile, bundle_entry(files[name], redactor, name)) for name in sorted(files)})
        notes.append("replay this machine with: mlprobe scan --replay REPORT.json")
    notes_doc = redactor.redact_obj(notes)
    envelope = ReportEnvelope(
        report_version=REPORT_VERSION, kind=REPORT_KIND, mlprobe_version=__version__,
        generated_at=now or utc_now(),
        redactions=from_json(Redactions, redactor.summary(), "redactions"),  # counted after every replacement
        scan=scan_doc, plan=plan_doc, verify=verify_doc, doctor=doctor_doc, capture_bundle=bundle, notes=tuple(notes_doc))
    return envelope.to_json()


SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.schema.json")


def report_schema() -> Dict[str, Any]:
    """The JSON Schema of the envelope (the `scan` inside follows mlprobe.schema.scan_schema())."""
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        doc = json.load(fh)
    assert isinstance(doc, dict)
    return doc
