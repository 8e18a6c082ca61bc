"""The doctor's rule engine: each row of knowledge/doctor.json names a check (in
mlprobe/doctor/checks/, one module per family); the check's hits become findings with the row's
severity, title and fix (templates filled from the hit), the evidence the check read and the row's
source. `diagnose` runs them all over one machine."""

from __future__ import annotations

import json
import string
from dataclasses import replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..model.doctor import (DOCTOR_KIND, DOCTOR_SCHEMA, DoctorResult, Finding, FrameworkSeen, LibraryLoad,
                            RuleOutcome, SEVERITIES)
from ..model.facts import Facts, FrameworkFacts, ScanReport
from ..model.jsontypes import JsonObject
from ..model.knowledge import Row, rows, table
from ..model.plan import Plan
from ..scan.capture import Host
from . import parse as P
from .checks import CHECKS, Hit, Unknown
from .context import DoctorContext


class _Blank(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return "?"


def _fill(template: str, params: Mapping[str, object]) -> str:
    values = _Blank({k: "" if v is None else v for k, v in params.items()})
    try:
        return string.Formatter().vformat(template, (), values)
    except (ValueError, IndexError, AttributeError):
        return template


def rule_rows() -> List[Dict[str, Any]]:
    """The rules, in report order; a row naming no known check is a bug the tests catch."""
    return rows("doctor", "rules")


def source_text(source_id: str) -> str:
    ref = (table("doctor").get("source_key") or {}).get(source_id)
    if isinstance(ref, dict):
        return f"{source_id}: {ref.get('reference')}"
    return source_id


def finding(row: Dict[str, Any], hit: Hit) -> Finding:
    fix = tuple(line for line in (_fill(str(f), hit.params) for f in row.get("fix") or []) if line.strip())
    severity = hit.severity or str(row["severity"])
    return Finding(rule=str(row["id"]), link=str(row["link"]), severity=severity, title=_fill(str(row["title"]), hit.params),
                   detail=hit.detail, evidence=tuple(hit.evidence), fix=fix, source=source_text(str(row["source"])))


def evaluate_rules(dc: DoctorContext) -> Tuple[List[Finding], List[RuleOutcome]]:
    found: List[Finding] = []
    outcomes: List[RuleOutcome] = []
    dc.found = found  # type: ignore[attr-defined]  # the framework checks ask whether a cause was found
    for row in rule_rows():
        fn = CHECKS.get(str(row.get("test")))
        if fn is None:
            outcomes.append(RuleOutcome(rule=str(row.get("id")), outcome="unknown", why="no such check"))
            continue
        try:
            result = fn(dc, Row(row))
        except Exception as exc:  # a check that trips over odd input costs its own rule, never the run
            outcomes.append(RuleOutcome(rule=str(row["id"]), outcome="unknown",
                                        why=f"the check failed on this capture ({type(exc).__name__}: {exc})"[:300]))
            continue
        if isinstance(result, Unknown):
            outcomes.append(RuleOutcome(rule=str(row["id"]), outcome="unknown", why=result.why))
            continue
        outcomes.append(RuleOutcome(rule=str(row["id"]), outcome="found" if result else "clear"))
        found.extend(finding(row, h) for h in result)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda f: order.get(f.severity, 9))
    return found, outcomes


def _frameworks_from(enum: P.Enumeration, system: Optional[str]) -> Tuple[FrameworkFacts, ...]:
    """The installed frameworks as the target interpreter's own enumeration names them."""
    from ..model.builds import flavour

    def text(value: object) -> Optional[str]:
        return value if isinstance(value, str) else None

    out: List[FrameworkFacts] = []
    for fw in enum.frameworks:
        info = fw.info
        cuda, hip = text(info.get("cuda")), text(info.get("hip"))
        out.append(FrameworkFacts(name=fw.name, version=fw.version, flavour=flavour(fw.name, fw.version, cuda, hip, system)
                                  or (("cpu" if fw.name == "torch" and cuda is None and hip is None else None)),
                                  cuda=cuda, hip=hip, source="enumeration"))
        if fw.name == "jax":
            if info.get("jaxlib"):
                out.append(FrameworkFacts(name="jaxlib", version=text(info["jaxlib"]), source="enumeration"))
            plugins = info.get("plugins")
            for plugin, ver in plugins.items() if isinstance(plugins, dict) else ():
                out.append(FrameworkFacts(name=str(plugin), version=text(ver), flavour=flavour(str(plugin), text(ver)),
                                          source="enumeration"))
    return tuple(out)


def _seen(enum: Optional[P.Enumeration]) -> Tuple[FrameworkSeen, ...]:
    if enum is None:
        return ()
    return tuple(FrameworkSeen(
        name=f.name, version=f.version,
        devices=tuple(f"{d.get('id')} {d.get('name') or ''}".strip() for d in f.devices),
        unavailable=tuple(str(u.get("reason")) for u in f.unavailable if u.get("reason") and not u.get("quiet")),
        error=f.error) for f in enum.frameworks)


def summary(findings: List[Finding], environment: List[str], frameworks: Tuple[FrameworkSeen, ...],
            facts: Facts) -> str:
    blocking = [f for f in findings if f.severity == "blocking"]
    warnings = [f for f in findings if f.severity == "warning"]
    if blocking:
        s = f"{len(blocking)} blocking problem" + ("s" if len(blocking) > 1 else "") + f": {blocking[0].title}"
        return s + (f" (and {len(warnings)} warning" + ("s" if len(warnings) > 1 else "") + ")" if warnings else "")
    gpus = [g.name for g in facts.gpus if g.name]
    where = f" ({', '.join(environment)})" if environment else ""
    if gpus:
        seen = [f"{fw.name} sees {', '.join(d for d in fw.devices if not d.startswith('cpu'))}"
                for fw in frameworks if any(not d.startswith("cpu") for d in fw.devices)]
        text = f"Nothing blocks: this machine{where} has {', '.join(dict.fromkeys(gpus))}"
        text += f"; {'; '.join(seen)}" if seen else ""
    else:
        text = f"Nothing blocks: this machine{where} has no GPU that a framework could use, so the frameworks " \
               "run on the CPU, as they should"
    if warnings:
        text += f" ({len(warnings)} warning" + ("s" if len(warnings) > 1 else "") + " below)"
    return text + "."


def _read_loaded(host: Host, libraries_doc: Optional[JsonObject]) -> Tuple[Tuple[LibraryLoad, ...], str, str]:
    """(the loads, the capture they came from, its text) from the live document or the bundle."""
    from . import libraries as L

    if libraries_doc is not None:
        text = json.dumps(libraries_doc)
        return L.parse_json(text), L.CAPTURE_JSON, text
    for name, parse in ((L.CAPTURE_JSON, L.parse_json), (L.CAPTURE_TEXT, L.parse_text)):
        try:
            cap = host.get(name)
        except KeyError:
            continue
        if cap.ok:
            text = cap.text()
            return parse(text), name, text
    return (), "", ""


def _read_starts(host: Host, starts_doc: Optional[JsonObject]) -> Optional[JsonObject]:
    from . import starts as S

    if starts_doc is not None:
        return starts_doc
    try:
        cap = host.get(S.CAPTURE)
    except KeyError:
        return None
    return S.parse(cap.text()) if cap.ok else None


def diagnose(host: Host, scan: ScanReport, plan_fn: Callable[[Facts, Optional[str]], Optional[Plan]],
             python: Optional[str] = None, enumeration_doc: Optional[JsonObject] = None,
             source: Optional[Mapping[str, str]] = None, starts_doc: Optional[JsonObject] = None,
             libraries_doc: Optional[JsonObject] = None) -> DoctorResult:
    """Every rule over one machine. `scan` is the scan; `plan_fn(facts, python)` plans it (the pipeline
    hands in its planner); `enumeration_doc` is what mlprobe.doctor.enumerate asked the target
    interpreter (`--python`), else the `framework-devices.json` capture is read. The checks read the
    scan's facts (with the frameworks the enumeration names, where it was asked) and the plan, typed."""
    facts: Facts = scan
    enum: Optional[P.Enumeration] = None
    note: Optional[str] = None
    how: str
    if enumeration_doc is not None:
        enum = P.enumeration_from(enumeration_doc, source=f"framework-devices ({python})")
        facts = replace(scan.facts(), frameworks=_frameworks_from(enum, scan.os.system))
        how = f"asked the frameworks in {python}"
    else:
        cap = host.get("framework-devices.json")
        enum = P.parse_framework_devices(cap.text()) if cap.ok else None
        if enum is None:
            note = ("the capture has no framework-devices.json (the frameworks' own device enumeration): make it "
                    "with `mlprobe capture` or `mlprobe report --include-raw`") if host.kind == "replay" else \
                (f"the frameworks could not be asked: {cap.error}" if cap.error else "the frameworks could not be asked")
            how = note
        else:
            how = ("replayed from framework-devices.json" if host.kind == "replay"
                   else f"asked the frameworks in {enum.python or 'this Python'}")
    py_version = (enumeration_doc or {}).get("python_version") if enumeration_doc else None
    mm = ".".join(str(py_version).split(".")[:2]) if py_version else None
    planned = plan_fn(facts, mm)
    dc = DoctorContext(host, facts, planned, enum, python=python, enumeration_note=note)
    from .starts import settings_seen

    dc.starts_doc = _read_starts(host, starts_doc)
    dc.settings_seen = settings_seen(dc.starts_doc) if dc.starts_doc is not None else ()
    dc.library_loads, dc.libraries_capture, dc.libraries_text = _read_loaded(host, libraries_doc)
    findings, outcomes = evaluate_rules(dc)
    environment = [f.title.replace("running in ", "", 1) for f in findings if f.rule in ("container-detected",
                                                                                         "wsl-detected")]
    seen = _seen(enum)
    blocking = any(f.severity == "blocking" for f in findings)
    return DoctorResult(schema=DOCTOR_SCHEMA, kind=DOCTOR_KIND, verdict="blocking" if blocking else "ok",
                        summary=summary(findings, environment, seen, facts),
                        python=python or (enum.python if enum else None) or scan.python.executable,
                        source=dict(source or scan.source or {"kind": host.kind}),
                        environment=tuple(environment), findings=tuple(findings), rules=tuple(outcomes),
                        frameworks=seen, enumeration=how, settings=dc.settings_seen, libraries=dc.library_loads)


__all__ = ["diagnose", "evaluate_rules", "finding", "rule_rows", "source_text"]
