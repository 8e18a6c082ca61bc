"""The report envelope: one versioned document with the scan, the plan, verify results (when asked)
and the capture bundle (when asked), redacted as a whole by one Redactor. The stages themselves are
run by mlprobe.pipeline.build_report; nothing here scans, plans or verifies.

    {"schema": "mlprobe.report/2", "kind": "mlprobe-report", "mlprobe_version": ..., "generated_at": ...,
     "redactions": {...}, "scan": {...}, "plan": {...}, "verify": {...}?, "doctor": {...}?,
     "capture_bundle": {"files": {name: {"text": ...} | {"base64": ...}}}?, "notes": [...]}

`mlprobe scan --replay report.json` reads `capture_bundle` (mlprobe/scan/host.py), so a report made with
--include-raw replays to the same facts elsewhere.
"""

from __future__ import annotations

import base64
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Dict, List, Mapping, Optional

from .. import __version__
from ..model.contract import from_json
from ..model.facts import ScanReport
from ..model.jsontypes import JsonObject
from ..model.report import (REPORT_KIND, REPORT_SCHEMA, BundleFile, CaptureBundle, DoctorSection, PlanSection,
                            ReportEnvelope, VerifySection)
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
    scan: ScanReport,
    plan: PlanSection,
    verify: Optional[VerifySection],
    options: ReportOptions = ReportOptions(),
    now: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    doctor: Optional[DoctorSection] = None,
) -> ReportEnvelope:
    """The envelope around a scan, its plan and (when asked) verify results, redacted as a whole.
    Composing the stages is mlprobe.pipeline.build_report's job; this only wraps and redacts. The
    redactor works on the sections' JSON (what a reader would see); each redacted section is read back
    into its type."""
    # A live report without --include-raw takes no extra captures (dxdiag alone can take 20 s): this
    # machine's names come from the host itself (Redactor.seed_live), the rest is found by shape.
    files = collect_bundle(host) if (options.include_raw or host.kind != "live") else {}
    scan_json = scan.to_json()
    plan_json = plan.to_json()
    verify_json = verify.to_json() if verify is not None else None
    doctor_json = doctor.to_json() if doctor is not None else None

    redactor = Redactor(protected_values(scan_json), enabled=options.redact)
    if options.redact:
        if host.kind == "live":
            redactor.seed_live(env)
        for name, data in files.items():
            redactor.learn(text_of(data)[0], mode_for(name))
        # secrets seen in the scan, plan or verify documents are replaced in the captures too
        for section in (scan_json, plan_json, verify_json, doctor_json):
            if section is not None:
                redactor.learn(json.dumps(section, ensure_ascii=False), "json")

    notes: List[str] = [s.missing.note for s in (plan, verify, doctor) if s is not None and s.missing is not None
                        and s.missing.note]
    # redacted in this order: a value's placeholder number is the order in which it is first met
    scan_doc = redactor.redact_obj(scan_json)
    plan_doc = redactor.redact_obj(plan_json)
    verify_doc = redactor.redact_obj(verify_json) if verify_json is not None else None
    doctor_doc = redactor.redact_obj(doctor_json) if doctor_json is not None else None
    bundle = None
    if options.include_raw:
        bundle = CaptureBundle(redacted=redactor.enabled, files={
            name: from_json(BundleFile, bundle_entry(files[name], redactor, name)) for name in sorted(files)})
        notes.append("replay this machine with: mlprobe scan --replay REPORT.json")
    notes_doc = redactor.redact_obj(notes)
    return ReportEnvelope(
        schema=REPORT_SCHEMA, kind=REPORT_KIND, mlprobe_version=__version__,
        generated_at=now or utc_now(),
        redactions=redactor.summary(),  # counted after every replacement
        scan=ScanReport.from_json(scan_doc), plan=PlanSection.from_json(plan_doc),
        verify=VerifySection.from_json(verify_doc) if verify_doc is not None else None,
        doctor=DoctorSection.from_json(doctor_doc) if doctor_doc is not None else None,
        capture_bundle=bundle, notes=tuple(notes_doc))


SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.schema.json")


def report_schema() -> JsonObject:
    """The JSON Schema of the envelope (the `scan` inside follows mlprobe.schema.scan_schema()), as
    report/report.schema.json holds it."""
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        doc = json.load(fh)
    assert isinstance(doc, dict)
    return doc
