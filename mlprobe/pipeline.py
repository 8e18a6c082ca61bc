"""scan -> plan -> install -> verify -> report, composed in one place. The commands call these
functions; the stages themselves never call each other backwards (report/ does not scan or plan,
plan/ does not read the environment: the pipeline reads it and hands it in).

    scan_report(host)            the scan as the `scan --json` document
    plan(report, env=...)        the ranked plan for it (MLPROBE_PYTORCH_INDEX_URL read from `env`)
    recommendation(...)          the one recipe install carries out
    build_report(host, options)  scan + plan (+ verify) in the redacted report envelope
    diff_side(path)              one side of `mlprobe diff` (a bundle is scanned and planned here)
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional

from .errors import error_text
from .model.facts import Facts
from .scan.capture import BundleError, Host
from .scan.run import facts_to_report, scan

if TYPE_CHECKING:  # the report modules load only for `report` and `diff` (they cost `plan` 70 ms)
    from .report.diff import Side
    from .report.envelope import ReportOptions

Scanner = Callable[[Host], Facts]


def scan_report(host: Host, source: Optional[Dict[str, Any]] = None, scanner: Scanner = scan) -> Dict[str, Any]:
    """The scan report (`mlprobe scan --json`). `scanner` lets a command wrap the scan in its own
    progress display."""
    return facts_to_report(scanner(host), source)


def plan(
    report: Dict[str, Any],
    framework: str = "any",
    python: Optional[str] = None,
    index_urls: Optional[Dict[str, str]] = None,
    env: Optional[Mapping[str, str]] = None,
) -> Dict[str, Any]:
    """The plan for a scan report; `env` defaults to this process's environment."""
    from .plan.planner import make_plan

    return make_plan(report, framework=framework, python=python, index_urls=index_urls,
                     env=os.environ if env is None else env)


def plan_section(scan_report: Dict[str, Any], env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The plan of a report, or a note saying why there is none (a planner bug, a bad mirror URL in the
    environment, ...): the report still carries the rest."""
    from .report.envelope import plain

    try:
        result = plan(copy.deepcopy(scan_report), framework="any", env=env)
    except Exception as exc:  # a planner failure must not cost the whole report
        return {"available": False, "note": f"no plan: make_plan failed ({type(exc).__name__}: {exc})"}
    out = plain(result)
    return out if isinstance(out, dict) else {"available": True, "result": out}


def verify_section(host: Host, python: Optional[str] = None) -> Dict[str, Any]:
    if host.kind == "replay":
        return {
            "available": False,
            "note": "verify runs on this machine, so it is skipped for a replayed bundle",
        }
    from .report.envelope import plain
    from .verify.runner import run_verify

    try:
        out = plain(run_verify(python=python) if python else run_verify())
    except Exception as exc:  # a StageError or anything else: the report still carries the rest
        return {"available": False, "note": f"verify failed: {error_text(exc)}"}
    return out if isinstance(out, dict) else {"available": True, "result": out}


def doctor(host: Host, python: Optional[str] = None, report: Optional[Dict[str, Any]] = None,
           source: Optional[Dict[str, Any]] = None, env: Optional[Mapping[str, str]] = None) -> Any:
    """`mlprobe doctor`: the scan (unless given), the plan, the frameworks' own enumeration (in `python`
    when named, else the `framework-devices.json` capture) and every rule over them: a DoctorResult."""
    from .doctor.rules import diagnose

    rep = report if report is not None else scan_report(host, source)
    enumeration = None
    if python is not None:
        from .doctor.enumerate import enumerate_devices

        enumeration = enumerate_devices(python)

    def plan_fn(r: Dict[str, Any], py: Optional[str]) -> Dict[str, Any]:
        try:
            return plan(copy.deepcopy(r), framework="any", python=py, env=env)
        except Exception:  # a planner failure costs the rules that read the plan, not the diagnosis
            return {}

    return diagnose(host, rep, plan_fn, python=python, enumeration_doc=enumeration, source=source)


def doctor_section(host: Host, report: Dict[str, Any]) -> Dict[str, Any]:
    """Doctor's findings for a report, or a note saying why there are none."""
    try:
        result = doctor(host, report=report)
    except Exception as exc:  # the report still carries the rest
        return {"available": False, "note": f"no doctor findings: {error_text(exc)}"}
    out: Dict[str, Any] = result.to_json()
    return out


def build_report(
    host: Host,
    options: "Optional[ReportOptions]" = None,
    source: Optional[Dict[str, Any]] = None,
    now: Optional[str] = None,
    env: Optional[Dict[str, str]] = None,
) -> Dict[str, Any]:
    """`mlprobe report`: scan, plan, verify when asked, then the redacted envelope."""
    from .report.envelope import ReportOptions, assemble

    options = options or ReportOptions()
    report = scan_report(host, source)
    planned = plan_section(report)
    verified = verify_section(host, options.python) if (options.verify or options.python) else None
    diagnosed = doctor_section(host, report)
    return assemble(host, report, planned, verified, options, now=now, env=env, doctor=diagnosed)


def _scan_bundle(path: Path) -> Dict[str, Any]:
    from .report.diff import DiffInputError
    from .scan.host import open_replay
    from .ui import display_path

    try:
        host = open_replay(path)
    except BundleError as exc:
        raise DiffInputError(str(exc)) from None
    return scan_report(host, {"kind": "replay", "bundle": display_path(path)})


def _plan_or_none(report: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    section = plan_section(report)
    return section if section.get("available") is not False else None


def diff_side(path: str) -> "Side":
    """One side of `mlprobe diff`: a report, a scan JSON (planned here) or a bundle (scanned and planned)."""
    from .report.diff import load_side

    return load_side(path, _scan_bundle, _plan_or_none)


__all__ = ["build_report", "diff_side", "doctor", "doctor_section", "plan", "plan_section", "scan_report", "verify_section"]
